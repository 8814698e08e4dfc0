"""train.eval_batch_size: validation's greedy decoding batch, by device unless set (fairseq's --batch-size-valid);
train.eval_beam_size: validation's search."""

import pytest
import torch

from nmt import translator as translator_module
from nmt.config import load_config
from nmt.errors import ConfigError
from nmt.run_dir import Run
from nmt.train import Trainer
from nmt.validation import GPU_VALIDATION_BATCH, validation_batch_size
from tests_helpers import TOY_RUN, write_config


@pytest.mark.parametrize("device, eval_batch_size, expected", [
    ("cuda", 0, GPU_VALIDATION_BATCH),  # measured on an H100's valid split
    ("cpu", 0, 48),  # decode.batch_size, chosen on a CPU
    ("cuda", 64, 64), ("cpu", 7, 7)])  # as set, on any device
def test_the_validation_batch_follows_the_device_unless_set(tmp_path, device, eval_batch_size, expected):
    cfg = load_config(write_config(tmp_path, base=TOY_RUN, train={"eval_batch_size": eval_batch_size},
                                   decode={"batch_size": 48}))
    assert validation_batch_size(cfg, torch.device(device)) == expected


def test_validation_decodes_in_batches_of_eval_batch_size_and_translation_keeps_its_own(tmp_path, toy_data_dir,
                                                                                        monkeypatch):
    cfg = load_config(write_config(tmp_path, base=TOY_RUN, train={"eval_batch_size": 3, "precision": "fp32"}))
    trainer = Trainer(cfg, Run(tmp_path / "run"), toy_data_dir, log=lambda *_: None)
    trainer.setup()
    rows, search = [], translator_module.search

    def recorded(model, src, *args, **kwargs):
        rows.append(src.shape[0])
        return search(model, src, *args, **kwargs)

    monkeypatch.setattr(translator_module, "search", recorded)
    scores = trainer.validate()
    assert 0.0 <= scores["bleu"] <= 100.0 and cfg.decode.batch_size != 3
    assert sum(rows) == len(trainer.dev_set.sources) > 3 and max(rows) == 3  # every sentence, three at a time


def test_a_negative_eval_batch_size_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="eval_batch_size"):
        load_config(write_config(tmp_path, base=TOY_RUN, train={"eval_batch_size": -1}))


def test_validation_searches_with_eval_beam_size_and_scores_what_that_search_gives(tmp_path, toy_data_dir,
                                                                                   toy_transformer_run, monkeypatch):
    from nmt.metrics import corpus_scores

    cfg = load_config(write_config(tmp_path, base=TOY_RUN, model={"num_layers": 2},  # toy_transformer_run's shape
                                   train={"eval_beam_size": 3, "precision": "fp32"}))
    trainer = Trainer(cfg, Run(tmp_path / "run"), toy_data_dir, log=lambda *_: None)
    trainer.setup()
    trained = Run(toy_transformer_run)
    trainer.model.load_state_dict(trained.load(trained.checkpoint_path("best"))["model"])  # one that translates
    beams, search = [], translator_module.search

    def recorded(model, src, decode, *args, **kwargs):
        beams.append(decode.beam_size)
        return search(model, src, decode, *args, **kwargs)

    monkeypatch.setattr(translator_module, "search", recorded)
    scores = trainer.validate()
    assert set(beams) == {3} and cfg.decode.beam_size == 2  # neither greedy nor the run's own beam
    beam3 = [t.text for t in trainer.translator.translate(trainer.dev_set.sources, beam_size=3)]
    assert scores["bleu"] == corpus_scores(beam3, trainer.dev_set.references, target_lang="fr")["bleu"] > 0
