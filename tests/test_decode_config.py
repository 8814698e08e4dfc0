"""One decoding configuration: every `DecodeConfig` field reaches the search (nmt engine) or CTranslate2's options, is
in the export, and is recorded in evaluation reports. A new field that some engine ignores fails here."""

import dataclasses
import json

import pytest
import torch

from nmt import translator as translator_module
from nmt.config import DecodeConfig, load_config
from nmt.translator import Translator

FIELDS = {f.name for f in dataclasses.fields(DecodeConfig)}
# A value different from the default for each field (used to see that it travels).
CHANGED = {"beam_size": 3, "length_penalty": 0.7, "length_normalization": "wu", "patient_stop": False,
           "max_len_a": 0.5, "max_len_b": 3, "batch_size": 2, "max_input_tokens": 4, "precision": "bf16",
           "sampling_topk": 5, "sampling_topp": 0.9, "sampling_temperature": 0.7, "sampling_seed": 7,
           "no_repeat_ngram_size": 3}
SAMPLING = {"sampling_topk", "sampling_topp", "sampling_temperature", "sampling_seed"}


def test_every_field_has_a_changed_value_here():
    assert set(CHANGED) == FIELDS, "add the new DecodeConfig field to CHANGED and check that every engine uses it"


@pytest.fixture
def recorded_searches(monkeypatch):
    calls = []
    real = translator_module.search

    def recording(model, src, decode, attention=None, n_best=1, cancelled=None, prefix=None, constraints=None):
        calls.append((decode, tuple(src.shape), torch.get_autocast_dtype("cpu")
                      if torch.is_autocast_enabled("cpu") else None))
        return real(model, src, decode, attention, n_best, cancelled, prefix, constraints)

    monkeypatch.setattr(translator_module, "search", recording)
    return calls


@pytest.mark.parametrize("name", sorted(FIELDS))
def test_the_nmt_engine_decodes_with_every_field(toy_transformer_run, recorded_searches, name):
    sampling = {"sampling_topk": 0, "beam_size": 1} if name in SAMPLING else {}  # these act only when sampling
    engine = Translator.from_run(toy_transformer_run, device="cpu",
                                 decode_overrides={**sampling, name: CHANGED[name]})
    sentences = ["I have two cats.", "We have five keys and three dogs.", "She has one book.", "Go."]
    engine.translate(sentences)
    assert recorded_searches and all(call[0] == engine.decode for call in recorded_searches)
    assert getattr(engine.decode, name) == CHANGED[name]  # travels whole
    if name == "batch_size":
        assert max(call[1][0] for call in recorded_searches) <= 2 and len(recorded_searches) == 2
    if name == "max_input_tokens":
        assert max(call[1][1] for call in recorded_searches) <= 4
    if name == "precision":
        assert {call[2] for call in recorded_searches} == {torch.bfloat16}
    else:  # auto: bf16 where the CPU has it natively, fp32 elsewhere
        from nmt.device import autocast_dtype
        assert {call[2] for call in recorded_searches} == {autocast_dtype("auto", torch.device("cpu"))}


def test_ctranslate2_options_follow_every_field():
    pytest.importorskip("ctranslate2")
    from nmt.ct2_engine import COMPUTE_TYPES, effective_decode, translate_options

    base = DecodeConfig()
    decode, notes = effective_decode(base)
    assert decode.patient_stop is False and "patient stop" in notes[0]
    # Greedy decoding and sampling keep one hypothesis, which ends the sentence with or without the patient stop:
    # before, `--beam 1` and every sampled translation warned of a difference there is not.
    for one in (dataclasses.replace(base, beam_size=1), dataclasses.replace(base, beam_size=1, sampling_topk=5)):
        decode, notes = effective_decode(one)
        assert decode.patient_stop is False and notes == []
    with pytest.raises(Exception, match="only normalizes by"):
        effective_decode(dataclasses.replace(base, length_normalization="wu"))
    # Fields CTranslate2 cannot follow are declared by effective_decode; the seed is set at load (the engine's own
    # test); the others change its options (the sampling ones when sampling).
    declared = {"patient_stop", "length_normalization", "sampling_seed"}
    sampling = dataclasses.replace(base, sampling_topk=0, beam_size=1)
    for name in FIELDS - declared:
        base = sampling if name in SAMPLING else DecodeConfig()
        changed = dataclasses.replace(base, **{name: CHANGED[name]})
        if name == "precision":
            assert COMPUTE_TYPES[changed.precision] != COMPUTE_TYPES[base.precision]
        else:
            assert translate_options(changed, 12, 8000) != translate_options(base, 12, 8000), name


def test_export_keeps_the_whole_decode_config_and_the_engine_uses_it(toy_transformer_run, tmp_path):
    pytest.importorskip("ctranslate2")
    from nmt.ct2_engine import CTranslate2Engine
    from nmt.export import export_ctranslate2

    engine = Translator.from_run(toy_transformer_run, device="cpu",
                                 decode_overrides={"beam_size": 3, "max_len_b": 4, "patient_stop": False})
    export_ctranslate2(engine, tmp_path / "ct2")
    stored = json.loads((tmp_path / "ct2" / "nmt_export.json").read_text())["decode"]
    assert DecodeConfig(**stored) == engine.decode
    exported = CTranslate2Engine(tmp_path / "ct2")
    assert exported.decode == engine.decode


def test_evaluation_reports_record_every_field_and_the_engine(toy_transformer_run, tmp_path):
    from nmt.evaluate import EvaluationSet, evaluate

    engine = Translator.from_run(toy_transformer_run, device="cpu", decode_overrides={"max_len_b": 7})
    report = evaluate(engine, EvaluationSet(["I have two cats."], [["J'ai deux chats."]], "probe", "a test"), tmp_path)
    assert set(report["decode"]) == FIELDS and report["decode"]["max_len_b"] == 7
    assert report["engine"] == "nmt" and report["checkpoint"]
    on_disk = json.loads((tmp_path / f"probe.beam{engine.decode.beam_size}.report.json").read_text())
    assert on_disk["decode"] == report["decode"]


@pytest.mark.parametrize("native", [True, False], ids=["native-bf16", "emulated-bf16"])
def test_bf16_asked_for_on_a_cpu_without_native_bf16_is_said_to_be_emulated(toy_transformer_run, monkeypatch,
                                                                           native):
    from nmt import device

    monkeypatch.setattr(device, "cpu_has_bf16", lambda: native)
    said = []
    engine = Translator.from_run(toy_transformer_run, device="cpu", decode_overrides={"precision": "bf16"},
                                 warn=said.append)
    assert engine.autocast_dtype is torch.bfloat16  # asked for: honoured either way
    emulated = [line for line in said if "emulated: this CPU has no AVX512-BF16/AMX" in line]
    assert len(emulated) == (0 if native else 1), said


@pytest.mark.parametrize("sampling,named", [
    ({"sampling_topk": 5}, "sampling (top-k 5) draws"),
    # Only top-p (or a temperature) given: top-k 0 is how the whole vocabulary is spelled, not what the user set.
    ({"sampling_topk": 0, "sampling_topp": 0.5}, "sampling (top-p 0.5) draws"),
    ({"sampling_topk": 0, "sampling_temperature": 0.7}, "sampling (temperature 0.7) draws"),
    ({"sampling_topk": 0}, "sampling (over the whole vocabulary) draws"),
    ({"sampling_topk": 10, "sampling_topp": 0.9}, "sampling (top-k 10, top-p 0.9) draws"),
])
def test_sampling_with_a_beam_is_refused_naming_the_settings_given(sampling, named):
    from nmt.config import check_n_best
    from nmt.errors import ConfigError

    with pytest.raises(ConfigError, match=r"it takes beam 1, not 4") as refused:
        check_n_best(1, DecodeConfig(beam_size=4, **sampling))
    assert str(refused.value).startswith(named)


@pytest.mark.parametrize("overrides,named", [
    ({"sampling_topp": 0.5}, "decode.sampling_topp 0.5 only applies when sampling, which decode.sampling_topk 1"),
    ({"sampling_temperature": 0.7}, "decode.sampling_temperature 0.7 only applies when sampling"),
    ({"sampling_topk": 1, "sampling_topp": 0.9}, "decode.sampling_topp 0.9 only applies when sampling"),
])
def test_a_sampler_setting_without_sampling_is_refused_not_ignored(overrides, named):
    """Before, `--set decode.sampling_topp=0.5` alone decoded by beam search, the setting silently unused."""
    from nmt.errors import ConfigError
    from nmt.engine_inputs import with_overrides

    with pytest.raises(ConfigError, match=named):
        with_overrides(DecodeConfig(), overrides)
    sampled = with_overrides(DecodeConfig(), {**overrides, "sampling_topk": 0, "beam_size": 1})
    assert sampled.samples and sampled.beam_size == 1
    assert with_overrides(DecodeConfig(), {"sampling_topp": 1.0}) == DecodeConfig()  # the default: nothing unused


def test_a_config_whose_sampler_settings_cannot_apply_says_so(tmp_path):
    warnings = []
    path = tmp_path / "c.yaml"
    path.write_text("decode:\n  sampling_topp: 0.9\n")
    load_config(path, warn=warnings.append)
    assert warnings == ["decode.sampling_topp 0.9 has no effect without sampling (decode.sampling_topk 1: search) "
                        "(ignored)"]
