"""A GRU's or LSTM's recurrence written out step by step, with padding masked instead of packed.

Why: `pack_padded_sequence` needs the lengths on the host (a sync every update on a GPU) and torch.compile cannot
trace it, so a packed encoder splits an RNN model into several graphs and rules out replaying the update as one CUDA
graph. Written out, the recurrence is plain tensor ops that dynamo traces whole. Padding is masked rather than
skipped: at a pad position the state is carried over unchanged, so the forward direction's final state is the one at
each sentence's last token and the backward direction starts at each sentence's own last token (its state stays at
zero over the trailing pads). Outputs at pad positions are zero, as `pad_packed_sequence` makes them.

It runs the `nn.GRU`/`nn.LSTM` module's own weights (same gate order and biases), so a model can switch between the
packed and the masked encoder at any time; the two agree to rounding (tests/models/test_models.py). Eager on a CPU
or under cuDNN the packed module is faster; this form is for compiled training on static shapes. `rnn_step` writes
out one decoder step the same way (an input-feeding decoder's, which dynamo 2.11 cannot trace through the module).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from nmt.models.dropout import dropout


def gru_cell(input_gates: torch.Tensor, h: torch.Tensor, weight_hh: torch.Tensor, bias_hh: torch.Tensor
             ) -> torch.Tensor:
    """One GRU step, the input's share of the gates (W_ih x + b_ih, (B, 3H)) already computed: torch's equations,
    n = tanh(W_in x + b_in + r ⊙ (W_hn h + b_hn)), h' = (1 − z) ⊙ n + z ⊙ h."""
    i_r, i_z, i_n = input_gates.chunk(3, dim=-1)
    h_r, h_z, h_n = F.linear(h, weight_hh, bias_hh).chunk(3, dim=-1)
    r, z = torch.sigmoid(i_r + h_r), torch.sigmoid(i_z + h_z)
    n = torch.tanh(i_n + r * h_n)
    return n + z * (h - n)


def lstm_cell(input_gates: torch.Tensor, h: torch.Tensor, c: torch.Tensor, weight_hh: torch.Tensor,
              bias_hh: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """One LSTM step (gates i, f, g, o in torch's order), the input's share of the gates already computed."""
    i, f, g, o = (input_gates + F.linear(h, weight_hh, bias_hh)).chunk(4, dim=-1)
    c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
    return torch.sigmoid(o) * torch.tanh(c), c


def _layer_weights(rnn: nn.RNNBase, layer: int, reverse: bool = False) -> tuple[torch.Tensor, ...]:
    """The module's own weight_ih, bias_ih, weight_hh, bias_hh of one layer in one direction."""
    suffix = f"l{layer}" + ("_reverse" if reverse else "")
    return tuple(getattr(rnn, f"{name}_{suffix}") for name in ("weight_ih", "bias_ih", "weight_hh", "bias_hh"))


def _direction(rnn: nn.RNNBase, layer: int, reverse: bool, inputs: torch.Tensor, valid: torch.Tensor):
    """One layer in one direction over the whole (B, S, ·) input → outputs (B, S, H), final h, final c (LSTM)."""
    weight_ih, bias_ih, weight_hh, bias_hh = _layer_weights(rnn, layer, reverse)
    input_gates = F.linear(inputs, weight_ih, bias_ih)
    batch, steps = valid.shape
    h = inputs.new_zeros(batch, rnn.hidden_size)
    c = h if isinstance(rnn, nn.LSTM) else None
    outputs = [h] * steps
    for t in (reversed(range(steps)) if reverse else range(steps)):
        keep = valid[:, t].unsqueeze(1)
        if c is None:
            h = torch.where(keep, gru_cell(input_gates[:, t], h, weight_hh, bias_hh), h)
        else:
            h_new, c_new = lstm_cell(input_gates[:, t], h, c, weight_hh, bias_hh)
            h, c = torch.where(keep, h_new, h), torch.where(keep, c_new, c)
        outputs[t] = h
    return torch.stack(outputs, dim=1), h, c


def masked_rnn(rnn: nn.RNNBase, inputs: torch.Tensor, valid: torch.Tensor):
    """What `rnn(pack_padded_sequence(inputs, lengths))` followed by `pad_packed_sequence` gives, for a batch-first
    GRU or LSTM and sentences padded at the end: inputs (B, S, I), valid (B, S) True at real tokens → outputs
    (B, S, H·dirs), zero at pads, and the final state (L·dirs, B, H) (a pair (h, c) for an LSTM). Dropout between
    layers as the module applies it in training."""
    if not rnn.batch_first or getattr(rnn, "proj_size", 0):
        raise ValueError("masked_rnn takes batch-first RNNs without projections")
    directions = (False, True) if rnn.bidirectional else (False,)
    finals_h, finals_c = [], []
    layer_input = inputs
    for layer in range(rnn.num_layers):
        if layer:
            layer_input = dropout(layer_input, rnn.dropout, rnn.training)
        per_direction = [_direction(rnn, layer, reverse, layer_input, valid) for reverse in directions]
        layer_input = torch.cat([outputs for outputs, _, _ in per_direction], dim=-1)
        finals_h += [h for _, h, _ in per_direction]
        finals_c += [c for _, _, c in per_direction]
    outputs = layer_input * valid.unsqueeze(-1).to(layer_input.dtype)
    final_h = torch.stack(finals_h)
    return outputs, ((final_h, torch.stack(finals_c)) if isinstance(rnn, nn.LSTM) else final_h)


def rnn_step(rnn: nn.RNNBase, inputs: torch.Tensor, state):
    """One time step of a batch-first, one-direction GRU or LSTM on the module's own weights: what `rnn(inputs,
    state)` gives for inputs (B, 1, I) and a state (L, B, H) (a pair (h, c) for an LSTM) → outputs (B, 1, H), the new
    state. For compiled training of a decoder whose next input depends on this step's output (Luong's input
    feeding): dynamo on torch 2.11 (the GPU image's) mistraces `nn.LSTM` fed its own output (it takes the input for
    unbatched and refuses the state as 4-D), one graph break per step; these plain tensor ops trace on any version."""
    is_lstm = isinstance(rnn, nn.LSTM)
    h_layers, c_layers = state if is_lstm else (state, None)
    x, new_h, new_c = inputs.squeeze(1), [], []
    for layer in range(rnn.num_layers):
        if layer:
            x = dropout(x, rnn.dropout, rnn.training)
        weight_ih, bias_ih, weight_hh, bias_hh = _layer_weights(rnn, layer)
        gates = F.linear(x, weight_ih, bias_ih)
        if is_lstm:
            x, c = lstm_cell(gates, h_layers[layer], c_layers[layer], weight_hh, bias_hh)
            new_c.append(c)
        else:
            x = gru_cell(gates, h_layers[layer], weight_hh, bias_hh)
        new_h.append(x)
    h = torch.stack(new_h)
    return x.unsqueeze(1), ((h, torch.stack(new_c)) if is_lstm else h)
