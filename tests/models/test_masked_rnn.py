"""The masked recurrence (nmt.models.masked_rnn): what a compiled graph runs instead of packed sequences."""

from unittest import mock

import pytest
import torch
import torch._dynamo as dynamo

from nmt.data.tokenizer import PAD_ID
from nmt.models.masked_rnn import masked_rnn, rnn_step
from nmt.models.rnn_encoder import RNNEncoder, trace_recurrences
from tests_helpers import VOCAB
from test_models import make, pad, sentence

LENGTHS = [9, 1, 4, 7, 2]  # the longest first and last, a one-token sentence: every padding case


def encoder_outputs(encoder, src, masked):
    """The encoder's outputs, final state and every parameter's gradient of their sum, packed or masked (the path a
    compiled graph takes)."""
    encoder.zero_grad()
    encoder.traced_when_compiled = masked
    with mock.patch("torch.compiler.is_compiling", return_value=masked):
        outputs, final, _ = encoder(src)
    finals = final if isinstance(final, tuple) else (final,)
    (outputs.sum() + sum(f.sum() for f in finals)).backward()
    return outputs, finals, [p.grad.clone() for p in encoder.parameters()]


@pytest.mark.parametrize("cell, bidirectional", [("gru", True), ("gru", False), ("lstm", False), ("lstm", True)])
def test_masked_recurrence_equals_packed(cell, bidirectional):
    """Outputs (zero at pads), final states at each sentence's own last token, and gradients: the same as packed
    sequences, to fp64 rounding, for two layers in either direction."""
    torch.manual_seed(0)
    encoder = RNNEncoder(torch.nn.Embedding(VOCAB, 8, padding_idx=PAD_ID), cell, 12, 2, 0.0, bidirectional).double()
    src = pad([sentence(n - 1, seed) for seed, n in enumerate(LENGTHS)])
    packed, masked = encoder_outputs(encoder, src, False), encoder_outputs(encoder, src, True)
    assert masked[0].shape == packed[0].shape == (len(LENGTHS), max(LENGTHS), 12 * (2 if bidirectional else 1))
    assert masked[0][src.eq(PAD_ID)].abs().max() == 0
    for got, want in zip((masked[0], *masked[1], *masked[2]), (packed[0], *packed[1], *packed[2])):
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)


def test_masked_recurrence_drops_out_between_layers_only():
    """As the module does in training: dropout on a layer's outputs before the next layer, none after the last."""
    torch.manual_seed(0)
    inputs, valid = torch.randn(3, 5, 4), torch.ones(3, 5, dtype=torch.bool)
    for layers, changed in ((1, False), (2, True)):
        rnn = torch.nn.GRU(4, 6, layers, batch_first=True, dropout=0.5 if layers > 1 else 0.0)
        evaluated = masked_rnn(rnn.eval(), inputs, valid)[0]
        trained = masked_rnn(rnn.train(), inputs, valid)[0]
        assert (not torch.equal(trained, evaluated)) == changed


@pytest.mark.parametrize("cell", ["gru", "lstm"])
def test_a_step_written_out_equals_the_module(cell):
    """rnn_step (input feeding's step under compile): the module's outputs, new state and gradients for two layers,
    over three steps each fed the last one's output, to fp64 rounding."""
    torch.manual_seed(0)
    rnn = getattr(torch.nn, cell.upper())(6, 6, 2, batch_first=True).double()
    shape = (2, 3, 6)  # (layers, batch, hidden)
    start = (torch.randn(shape, dtype=torch.float64), torch.randn(shape, dtype=torch.float64))
    start = start if cell == "lstm" else start[0]
    first_input = torch.randn(3, 1, 6, dtype=torch.float64)

    def three_steps(step):
        rnn.zero_grad()
        inputs, state, outputs = first_input, start, []
        for _ in range(3):
            inputs, state = step(inputs, state)
            outputs.append(inputs)
        states = state if cell == "lstm" else (state,)
        (sum(o.sum() for o in outputs) + sum(s.square().sum() for s in states)).backward()
        return [*outputs, *states, *(p.grad.clone() for p in rnn.parameters())]

    for got, want in zip(three_steps(lambda x, s: rnn_step(rnn, x, s)), three_steps(rnn)):
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", ["bahdanau", "luong-dot-feed", "seq2seq"])
def test_rnn_training_forward_is_one_graph_when_traced(name):
    """Packed sequences split an RNN into several graphs (dynamo cannot trace packing); with the encoder masked and
    the decoder's steps traced through, the fused forward and loss are one graph: one CUDA graph can replay it."""
    model = make(name).train()
    src, tgt = pad([sentence(6, 1), sentence(3, 2)]), pad([sentence(5, 3), sentence(2, 4)])
    keep = torch.arange(tgt.numel())  # static batches keep every position by flat index (PAD targets ignored)

    def graphs():
        dynamo.reset()
        try:
            return dynamo.explain(lambda: model(src, tgt, keep, tgt.flatten(), 0.1))().graph_count
        except dynamo.exc.TorchRuntimeError:  # torch 2.11: packing fails under fake tensors instead of breaking
            return None

    with mock.patch.object(dynamo.config, "allow_rnn", True):
        untraced = graphs()
        assert untraced is None or untraced > 1
        trace_recurrences(model)
        assert graphs() == 1
