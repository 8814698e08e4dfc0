"""Issue 15's GPU figures at a glance: one markdown summary of a GPU session's records (results/gpu-*-SLUG.json).

    python scripts/gpu_report.py --slug h100                      # after unpacking a phase's $OUT/PHASE.tgz here
    python scripts/gpu_report.py --results gpu-session/dry-run-results --slug cpu

`scripts/gpu_session.sh lease` prints it at its end, so that the reply of a device-tool call already says what was
measured and what is missing while the machine is still warm (it goes back 30 s after a call). It reads records
only: benches (tokens/s and MFU as the median of their windows, the host's blocked share of the timed windows on a
GPU), the eager host floor, the update's device time by kernel category, time-to-BLEU runs, validation's greedy
decoding per batch size (cuDNN attention off and on), and the old vs new A/Bs; then the issue's three GPU goals
(MFU, dev BLEU 50 within 90 s, test BLEU 55 within 5 minutes), met or not.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import re
import statistics
import subprocess
from pathlib import Path

MFU_GOAL, DEV_BLEU_SECONDS_GOAL = 0.25, 90.0
TEST_BLEU_GOAL, TEST_BLEU_SECONDS_GOAL = 55.0, 300.0
REPOSITORY = Path(__file__).resolve().parent.parent
# What a measurement depends on in the repository, with the script that made it: two records of commits whose trees
# agree here measured the same code (a lease of a later commit that changed only docs or records measures what the
# earlier one did, so their seeds compare).
TRAINING_CODE = ("nmt", "configs")


@functools.cache
def training_code(commit: str, measured_by: str = "scripts/time_to_bleu.py") -> str:
    """The git objects of TRAINING_CODE and the measuring script at `commit`, or the commit itself where git cannot
    say (the device's copy has no .git; a commit this clone lacks)."""
    paths = (*TRAINING_CODE, measured_by)
    out = subprocess.run(["git", "-C", str(REPOSITORY), "rev-parse", *(f"{commit}:{path}" for path in paths)],
                         capture_output=True, text=True)
    return " ".join(out.stdout.split()) if out.returncode == 0 else commit


def name_of(path: Path, prefix: str, slug: str) -> str:
    return path.name[len(prefix):-len(f"-{slug}.json")]


def blocked_share(windows: list[dict]) -> str:
    """The host's seconds waiting for the device over the timed windows' seconds: high when the device is the
    bottleneck, ~0 when the host is on the critical path (or on a CPU, where the work is done before the wait)."""
    timed = [w for w in windows if "host_blocked_s" in w and "window_s" in w]  # records before these fields: none
    total = sum(w["window_s"] for w in timed)
    return f"{sum(w['host_blocked_s'] for w in timed) / total:.0%}" if total else "–"


def bench_rows(records: dict[str, dict]) -> list[str]:
    rows = ["| bench | commit | tokens/s | MFU (median of windows) | MFU range | warm-up s | host blocked | "
            "overrides |", "|---|---|---|---|---|---|---|---|"]
    for name, record in sorted(records.items(), key=lambda kv: -kv[1]["figures"][0]["tokens_per_s"]):
        f = record["figures"][0]
        mfus = [w["mfu"] for w in f.get("windows", [])] or [f["mfu"]]
        overrides = environment_settings(record) + record.get("overrides", []) + \
            (["(compiled)"] if f.get("compile") else [])
        rows.append(f"| {name} | {record['commit']} | {f['tokens_per_s']:,.0f} | {f['mfu']:.1%} | "
                    f"{min(mfus):.1%}–{max(mfus):.1%} | {f.get('warmup_s', 0):.0f} | "
                    f"{blocked_share(f.get('windows', []))} | {' '.join(overrides) or '(config as shipped)'} |")
    return rows


def validation_seconds(seeds: list[dict]) -> str:
    """The seeds' validation seconds, the greedy decoding's share where the record has it (since 2026-11-26), and
    what training waited of them where validations ran beside it (train.eval_in_background)."""
    total = f"{sum(s.get('validation_s', 0) for s in seeds):.0f}"
    parts = []
    if any("validation_decode_s" in s for s in seeds):
        parts.append(f"decoding {sum(s.get('validation_decode_s', 0) for s in seeds):.0f}")
    if any(s.get("background_validations") for s in seeds):
        parts.append(f"in the background; training waited {sum(s['validation_waited_s'] for s in seeds):.0f}")
    return f"{total} ({'; '.join(parts)})" if parts else total


def seconds_to_target(seed: dict) -> str:
    """A seed's seconds to its target, and where they went when the record says: the process's start-up and the
    training clock of the weights that reached it (the rest is that validation and the poll)."""
    if seed["seconds_to_target"] is None:
        return "–"
    parts = [f"start-up {seed['setup_s']:.0f}" if seed.get("setup_s") is not None else "",
             f"training {seed['training_s_at_target']:.0f}" if seed.get("training_s_at_target") is not None else ""]
    parts = [part for part in parts if part]
    return f"{seed['seconds_to_target']:.0f}" + (f" ({' + '.join(parts)})" if parts else "")


def time_to_bleu_rows(records: dict[str, dict]) -> list[str]:
    rows = ["| run | commit | seconds to target (per seed) | best dev BLEU | median MFU in training | validation s | "
            "test BLEU | overrides |", "|---|---|---|---|---|---|---|---|"]
    for name, record in sorted(records.items()):
        seeds = record["seeds"]
        times = ", ".join(seconds_to_target(s) for s in seeds)
        if record.get("stalled"):  # its training blocked on a full stderr pipe: the record's note says
            times = "stalled, not a figure"
        mfus = [s["median_mfu"] for s in seeds if s.get("median_mfu") is not None]
        tests = [s["test_bleu"] for s in seeds if "test_bleu" in s]
        rows.append(f"| {name} | {record['commit']} | {times} (target {seeds[0]['dev_bleu_target']:g}) | "
                    f"{max((s['best_dev_bleu'] or 0) for s in seeds):.2f} | "
                    f"{f'{statistics.median(mfus):.1%}' if mfus else '–'} | "
                    f"{validation_seconds(seeds)} | "
                    f"{', '.join(f'{t:.2f}' for t in tests) or '–'} | {' '.join(record.get('overrides', []))} |")
    return rows


# Settings the lease trains to dev BLEU 50 seed by seed beside transformer.yaml as shipped (lease-seedN): each
# becomes a GPU default only if, with the same training code on one device kind (seeds perhaps of different
# leases), every one of >= 3 seeds passes 50 sooner in seconds and at most one validation later in updates
# (docs/gpu.md, "One lease").
LEASE_VARIANTS = ("bf16-residual", "bf16-nodrop")


def bleu_at(seed: dict, step: int) -> str:
    """Dev BLEU at `step` from the seed's curve (records since the twenty-ninth session)."""
    return next((f"{bleu:.2f}" for at, _, bleu in seed.get("dev_bleu_curve", []) if at == step), "–")


def eval_every(record: dict) -> int | None:
    return next((int(o.split("=")[1]) for o in record.get("overrides", []) if o.startswith("train.eval_every=")),
                None)


def missed_target(ours: dict, theirs: dict) -> str:
    """Which of a variant's seed and the shipped recipe's seed did not reach the dev BLEU target."""
    reached = (ours["seconds_to_target"] is not None, theirs["seconds_to_target"] is not None)
    return {(False, False): "neither run reached the target",
            (False, True): "the variant did not reach the target",
            (True, False): "the shipped recipe did not reach the target"}[reached]


LEASE_RUN = re.compile(r"dev-bleu50-lease-(?:(?P<variant>.+)-)?seed(?P<seed>\d+)(?:-(?P<commit>[0-9a-f]{7,40}))?")


def lease_seeds(runs: dict[str, dict]) -> dict[tuple[str, str], dict[int, dict]]:
    """The lease's dev-BLEU records by (variant, training code), then seed: "" is transformer.yaml as shipped
    (lease-seedN); a record kept under its commit's name (lease-...-seedN-COMMIT) counts as lease-...-seedN."""
    seeds: dict[tuple[str, str], dict[int, dict]] = {}
    for name, record in runs.items():
        match = LEASE_RUN.fullmatch(name)
        if match and match["commit"] in (None, record["commit"]):
            key = (match["variant"] or "", training_code(record["commit"]))
            seeds.setdefault(key, {})[int(match["seed"])] = record
    return seeds


def variant_rows(runs: dict[str, dict]) -> list[str]:
    """Each lease variant against transformer.yaml as shipped, seed by seed where both trained the same code, and
    the default rule's verdict per such code (LEASE_VARIANTS)."""
    rows, by_code = [], lease_seeds(runs)
    for variant in LEASE_VARIANTS:
        for code in [code for v, code in by_code if v == variant]:
            ours_by_seed, base_by_seed = by_code[(variant, code)], by_code.get(("", code), {})
            verdicts, commits = [], {record["commit"] for record in ours_by_seed.values()}
            for seed in sorted(set(ours_by_seed) & set(base_by_seed)):
                record, base = ours_by_seed[seed], base_by_seed[seed]
                ours, theirs = record["seeds"][0], base["seeds"][0]
                commits |= {record["commit"], base["commit"]}
                if ours["seconds_to_target"] is None or theirs["seconds_to_target"] is None:
                    rows.append(f"- {variant}, seed {seed}: {missed_target(ours, theirs)}")
                    # Reaching the target where the shipped recipe did not is a win; missing it is a loss either way.
                    verdicts.append(ours["seconds_to_target"] is not None)
                    continue
                later = ours["step_at_target"] - theirs["step_at_target"]
                verdicts.append(ours["seconds_to_target"] < theirs["seconds_to_target"]
                                and later <= (eval_every(record) or 0))
                rows.append(f"- {variant}, seed {seed} ({record['commit']}; shipped {base['commit']}): "
                            f"{ours['seconds_to_target']:.1f} s at update {ours['step_at_target']:,} against "
                            f"{theirs['seconds_to_target']:.1f} s at {theirs['step_at_target']:,}; its dev BLEU at "
                            f"{theirs['step_at_target']:,}: {bleu_at(ours, theirs['step_at_target'])}")
            if not verdicts:
                verdict = (f"not decided: the shipped recipe trained none of its seeds "
                           f"({', '.join(map(str, sorted(ours_by_seed)))}) with the same training code (seconds "
                           "compare only where nmt/, configs/ and scripts/time_to_bleu.py are the same)")
            elif len(verdicts) < 3:
                verdict = f"not decided: {len(verdicts)} seed(s) of the 3 asked"
            else:
                verdict = "make it the GPU default" if all(verdicts) else "keep the shipped recipe"
            rows.append(f"- {variant} against the shipped recipe ({', '.join(sorted(commits))}): {verdict}")
    return rows


def greedy_rows(records: dict[str, dict]) -> list[str]:
    """Validation's greedy decoding of a trained model (scripts/bench_greedy.py): warm sentences/s and the cold
    first pass per batch size, with SDPA's cuDNN kernels off (nmt's choice) or on, where the record says."""
    rows = ["| record | batch | cuDNN attention | sentences/s, warm | first pass s (cold) | host syncs |",
            "|---|---|---|---|---|---|"]
    for name, record in sorted(records.items()):
        for row in record.get("figures", []):
            if "batch_size" not in row:  # an old-against-new record
                continue
            rows.append(f"| {name} | {row['batch_size']} | {row.get('cudnn_attention', 'torch’s choice')} | "
                        f"{row['sentences_per_s']:,.1f} | {row.get('first_pass_s', '–')} | "
                        f"{row.get('host_syncs_per_pass', '–')} |")
    return rows


def seeds_pooled(runs: list[dict]) -> dict[tuple, list[dict]]:
    """The seeds of time-to-BLEU records that trained alike (the same training code and overrides; a lease runs
    one record per seed, so that a call cut short keeps the seeds it finished), pooled."""
    pools: dict[tuple, list[dict]] = {}
    for record in runs:
        key = (training_code(record["commit"]), tuple(record.get("overrides", [])))
        pools.setdefault(key, []).extend(record["seeds"])
    return pools


def median_seconds(seeds: list[dict]) -> float | None:
    """The median seconds to target over `seeds`, a seed that never reached it counted as slower than any that
    did; None when the median is such a seed."""
    times = sorted(math.inf if s["seconds_to_target"] is None else s["seconds_to_target"] for s in seeds)
    median = statistics.median(times) if times else math.inf
    return None if math.isinf(median) else median


def config_then(record: dict) -> str:
    """The text of the bench's config at the bench's commit (its overrides were relative to that), or as it is now
    where git cannot say."""
    path = record.get("config", "configs/transformer.yaml")
    out = subprocess.run(["git", "-C", str(REPOSITORY), "show", f"{record['commit']}:{path}"], capture_output=True,
                         text=True)
    return out.stdout if out.returncode == 0 else (REPOSITORY / path).read_text()


# Settings that leave a warm training update as it is (validation, checkpoints, when to stop, logging, decoding,
# data): a bench that differs from the config only in these measured the update the config ships.
NOT_THE_UPDATE = ("name", "data.", "decode.", "train.max_steps", "train.max_epochs", "train.eval_", "train.save_every",
                  "train.keep_last", "train.log_every", "train.patience", "train.best_metric", "train.time_budget_s",
                  "train.nonfinite_loss", "train.init_from")


def environment_settings(record: dict) -> list[str]:
    """The compiler's settings a bench took from the environment (results_record.py's `environment`), NAME=VALUE."""
    return [f"{name}={value}" for name, value in record.get("environment", {}).items()]


def flat(tree: dict, prefix: str = "") -> dict:
    """A nested mapping as dotted keys: {"train": {"lr": 1}} -> {"train.lr": 1}."""
    dotted = {}
    for key, value in tree.items():
        dotted.update(flat(value, f"{prefix}{key}.") if isinstance(value, dict) else {f"{prefix}{key}": value})
    return dotted


def settings_of(config_text: str, overrides: list[str]) -> dict:
    """Every setting of a config's text with its overrides, as the CLI reads them (defaults filled in), dotted."""
    import yaml  # here, not at the top: a report of no bench needs neither (nor the nmt on sys.path)
    from nmt.config import apply_overrides, from_dict, to_dict
    return flat(to_dict(from_dict(apply_overrides(yaml.safe_load(config_text) or {}, overrides))))


@functools.cache
def shipped_settings(config: str) -> dict:
    return settings_of((REPOSITORY / config).read_text(), [])


def unshipped(record: dict) -> list[str]:
    """The bench's settings of the update that its config as shipped now does not have (the config at the bench's
    commit with the bench's overrides and --compile, against the config today; the environment the bench set for
    the compiler), as KEY=VALUE."""
    from nmt.errors import ConfigError

    shipped = shipped_settings(record.get("config", "configs/transformer.yaml"))
    try:
        trained = settings_of(config_then(record), record.get("overrides", []))
    except ConfigError:  # a setting since renamed or removed: say what the bench set, as it set it
        return (record.get("overrides", []) or ["(the config at the bench's commit)"]) + environment_settings(record)
    if record["figures"][0].get("compile"):
        trained["train.compile"] = True
    return [f"{key}={trained[key]}" for key in trained
            if trained[key] != shipped[key] and not key.startswith(NOT_THE_UPDATE)] + environment_settings(record)


def mfu_goal(transformer: dict[str, dict]) -> str:
    """MFU on transformer.yaml: the best bench of the config as shipped decides; the best with settings it does
    not ship (a larger batch, compiled, ...) is said beside it, as what shipping them would give."""
    goal = f"- MFU ≥ {MFU_GOAL:.0%} on transformer.yaml"
    if not transformer:
        return f"{goal}: not measured"
    changes = {name: unshipped(record) for name, record in transformer.items()}
    mfu = {name: record["figures"][0]["mfu"] for name, record in transformer.items()}
    as_shipped = [name for name in transformer if not changes[name]]
    best_shipped = max(as_shipped, key=mfu.get, default=None)
    line = (f"{goal}: as shipped best {mfu[best_shipped]:.1%} ({best_shipped}): "
            f"{'met' if mfu[best_shipped] >= MFU_GOAL else 'not met'}" if best_shipped else
            f"{goal}: as shipped not measured: not met")
    if len(as_shipped) < len(transformer):
        best = max((name for name in transformer if changes[name]), key=mfu.get)
        line += f"; with settings it does not ship best {mfu[best]:.1%} ({best}: {' '.join(changes[best])})"
    return line


def goals(benches: dict[str, dict], runs: dict[str, dict], device: str) -> list[str]:
    transformer = {name: r for name, r in benches.items() if r["figures"][0].get("architecture") == "transformer"}
    # The goals name an H100; an H200 (the tool's fallback) shares its bf16 peak but not its memory speed.
    lines = [] if "H100" in device or not (benches or runs) else \
        [f"- measured on {device.split(' (')[0]}, not the H100 the issue names: say so beside every figure"]
    lines.append(mfu_goal(transformer))
    reached = [r for name, r in runs.items()  # gpu-time-to-dev-bleu50*, less runs that stalled (see their note)
               if name.startswith("dev-bleu50") and not r.get("stalled")]
    lines.append(dev_bleu_goal(reached))
    tested = [seed for name, r in runs.items() if name.startswith("test-bleu") and not r.get("stalled")
              for seed in r["seeds"] if seed.get("test_bleu") is not None]
    lines.append(test_bleu_goal(tested))
    return lines


def dev_bleu_goal(reached: list[dict]) -> str:
    if not reached:
        return "- dev BLEU 50 within 90 s: not measured"
    pools = seeds_pooled(reached)
    medians = {key: median_seconds(seeds) for key, seeds in pools.items()}
    timed = {key: m for key, m in medians.items() if m is not None}
    if not timed:
        return "- dev BLEU 50 within 90 s: no run reached the target within its wall limit"
    # The goal is a median of 3 seeds: a setting trained that often, if any, before a quicker single seed.
    enough = {key: m for key, m in timed.items() if len(pools[key]) >= 3} or timed
    key = min(enough, key=enough.get)
    fastest, seeds = timed[key], len(pools[key])
    return (f"- dev BLEU 50 within {DEV_BLEU_SECONDS_GOAL:.0f} s: fastest median {fastest:.0f} s "
            f"({'met' if fastest <= DEV_BLEU_SECONDS_GOAL and seeds >= 3 else 'not met'}; {seeds} seed(s), "
            f"the issue asks 3)")


def test_bleu_goal(tested: list[dict]) -> str:
    """Test BLEU within 5 minutes of process start: the best test BLEU of a training that ended within them (its
    process's wall clock; evaluating the test split afterwards is the measurement, said beside it)."""
    goal = f"- test BLEU {TEST_BLEU_GOAL:g} within {TEST_BLEU_SECONDS_GOAL / 60:g} minutes"
    if not tested:
        return f"{goal}: not measured"
    within = [seed for seed in tested if seed["wall_s"] <= TEST_BLEU_SECONDS_GOAL]
    best = max(within or tested, key=lambda seed: seed["test_bleu"])
    met = bool(within) and best["test_bleu"] >= TEST_BLEU_GOAL
    evaluating = f" + {best['test_evaluate_s']:.0f} s evaluating test" if "test_evaluate_s" in best else ""
    return (f"{goal}: best {best['test_bleu']:.2f} after {best['wall_s']:.0f} s of training{evaluating} "
            f"({'met' if met else 'not met'})")


def profile_rows(records: dict[str, dict]) -> list[str]:
    """Where a warm update's device time went (scripts/profile_update.py): per category, ms an update and share."""
    rows = []
    for name, record in sorted(records.items()):
        f = record["figures"]
        idle = f"device idle {f['device_idle_share']:.1%}; " if "device_idle_share" in f else ""  # none on a CPU
        rows += [f"- {name} ({record['commit']}, {' '.join(record.get('overrides', [])) or 'as shipped'}): "
                 f"{f['wall_ms_per_update']:.2f} ms an update profiled, MFU {f['mfu_profiled']:.1%}; {idle}"
                 f"products and attention alone would give MFU {f.get('mfu_if_only_counted_kernels_ran', 0):.1%}",
                 "  " + ", ".join(f"{label} {row['ms_per_update']:.2f} ms ({row['share']:.0%})"
                                  for label, row in f["categories"].items())]
    return rows + pair_rows(records)


# Profiles the lease takes in pairs on one machine: (the base's suffix, the variant's suffix, what the variant changes).
PROFILE_PAIRS = (("-fp32-residual", "-bf16-residual", "bf16 residual stream"),
                 ("-bf16-residual", "-bf16-nodrop", "attention and activation dropout off, bf16 stream"),
                 ("-bf16-nodrop", "-bf16-flex", "FlexAttention on packed rows, no inner dropout, bf16 stream"))


def pair_rows(records: dict[str, dict]) -> list[str]:
    """Each variant's profile against its base's (PROFILE_PAIRS: NAME-fp32-residual against NAME-bf16-residual, ...),
    the device time of a warm update, where both profiled the same training code. A record kept under its commit's
    name (NAME-COMMIT, when a later lease wrote NAME anew) pairs as NAME."""
    def key(name: str, record: dict) -> str:
        return name.removesuffix(f"-{record['commit']}")
    by_key = {(key(name, r), training_code(r["commit"], "scripts/profile_update.py")): r for name, r in records.items()}
    rows = []
    for base_suffix, suffix, change in PROFILE_PAIRS:
        for (name, code), record in sorted(by_key.items()):
            if name.endswith(suffix) and (base := by_key.get((name.removesuffix(suffix) + base_suffix, code))):
                before, after = base["figures"]["wall_ms_per_update"], record["figures"]["wall_ms_per_update"]
                rows.append(f"- {change} ({name.removesuffix(suffix)}, {record['commit']}): {before:.2f} → "
                            f"{after:.2f} ms an update, {before / after:.2f}×")
    return rows


def report(results: Path, slug: str) -> str:
    def records(prefix: str) -> dict[str, dict]:
        return {name_of(p, prefix, slug): json.loads(p.read_text())
                for p in sorted(results.glob(f"{prefix}*-{slug}.json"))}
    benches, floors = records("gpu-bench-"), records("gpu-host-overhead-")
    runs = {**records("gpu-time-to-"), **{f"recipe-{k}": v for k, v in records("gpu-recipe-").items()}}
    abs_, greedy, profiles = records("gpu-train-ab-"), records("gpu-greedy-"), records("gpu-profile-")
    device = next((r["device"] for group in (benches, runs, abs_, floors) for r in group.values()), "no records")
    lines = [f"# GPU records in {results} ({slug}): {device}", ""]
    if benches:
        lines += ["## Training step, warm", "", *bench_rows(benches), ""]
    for name, record in floors.items():
        f = record["figures"]
        lines.append(f"- eager host floor ({name}): {f['host_ms_per_update_median']} ms an update "
                     f"({f['computing_operators_per_update']:,} operators): eager MFU at most "
                     f"{f['eager_mfu_ceiling']:.1%}")
    if profiles:
        lines += ["", "## Where the update's device time goes (scripts/profile_update.py)", "", *profile_rows(profiles)]
    if runs:
        lines += ["", "## Time to BLEU (wall clock from process start)", "", *time_to_bleu_rows(runs), ""]
        lines += variant_rows(runs)
    if greedy:
        lines += ["## Validation's greedy decoding (scripts/bench_greedy.py)", "", *greedy_rows(greedy), ""]
    for name, record in abs_.items():
        f = record["figures"]
        lines.append(f"- old vs new ({name}, {f['before_commit']}, {f['rounds_done']} of {f['rounds_planned']} "
                     f"rounds): {statistics.median(f['before_tokens_per_s']):,.0f} → "
                     f"{statistics.median(f['after_tokens_per_s']):,.0f} tokens/s, {f['median_ratio']:.2f}×")
    lines += ["", "## Issue 15's GPU goals", "", *goals(benches, runs, device)]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", type=Path, default=Path("results"))
    parser.add_argument("--slug", required=True, help="the device part of the records' names: h100, h200, cpu")
    parser.add_argument("--out", type=Path, help="also write the summary here")
    args = parser.parse_args()
    text = report(args.results, args.slug)
    print(text, end="")
    if args.out:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
