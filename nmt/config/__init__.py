"""Typed configuration: YAML → dataclasses once, validated before any work starts.

Code below the CLI receives these objects (or a few of their fields), never raw dicts. The sections and their
settings (`sections`), how YAML becomes them (`parsing`), `--set` (`overrides`), the rules across settings
(`consistency`) and `--config` itself (`loading`).
"""

from nmt.config.consistency import (check_consistency, check_constraints, check_fits_positions, check_n_best,
                                    decode_lengths, sampler_settings_unused, subword_sampling_refused)
from nmt.config.loading import load_config, shipped_configs
from nmt.config.overrides import apply_overrides, decode_overrides, sampling_overrides
from nmt.config.parsing import ANCHORS_PREFIX, UniqueKeyLoader, from_dict, read_yaml, to_dict
from nmt.config.sections import (BUILTIN_CORPUS, CUDA_GRAPH_MODES, D2L_CORPUS_URL, FRA_TXT_SHA256, INT64_MAX,
                                 MIN_PEAK_TFLOPS, SECTIONS, Config, DataConfig, DecodeConfig, ModelConfig, TrainConfig,
                                 data_order_settings, fingerprint_settings, model_args, sections_holding, tsv_columns)

__all__ = [
    "ANCHORS_PREFIX", "BUILTIN_CORPUS", "CUDA_GRAPH_MODES", "D2L_CORPUS_URL", "FRA_TXT_SHA256", "INT64_MAX",
    "MIN_PEAK_TFLOPS", "SECTIONS", "Config", "DataConfig", "DecodeConfig", "ModelConfig", "TrainConfig",
    "UniqueKeyLoader", "apply_overrides", "check_consistency", "check_constraints", "check_fits_positions",
    "check_n_best", "data_order_settings", "decode_lengths", "decode_overrides", "fingerprint_settings", "from_dict",
    "load_config", "model_args", "read_yaml", "sampler_settings_unused", "sampling_overrides", "sections_holding",
    "shipped_configs", "subword_sampling_refused", "to_dict", "tsv_columns",
]
