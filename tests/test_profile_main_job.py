"""lab/profile_main_job.py cuts the main job's asv step by the times asv's lines arrived."""

from __future__ import annotations

import json

from lab import profile_main_job

# (seconds since the job began, line): two builds, two interleaved rounds, a C++ compile in the
# first round and the Callgrind batch in the last one.
TIMELINE = [
    (0.0, "==> [1/5] torch history: one git commit per torch build  (+0 s)\n"),
    (20.0, "==> [3/5] asv run over 2 of 2 torch build(s)  (+20 s)\n"),
    (30.0, "· Discovering benchmarks\n"),
    (40.0, "[ 0.00%] · For torch commit aaaa1111 <torch-2.1.0> (round 1/2):\n"),
    (45.0, "[ 0.00%] ·· Benchmarking virtualenv-py3.11\n"),
    (75.0, "[ 1.00%] ··· Setting up measure.walltime.timing:202                          ok\n"),
    (80.0, "[ 1.00%] ··· Running (instruction_counts.x.time_wall--)....\n"),
    (80.0, "[25.00%] · For torch commit bbbb2222 <torch-2.2.0> (round 1/2):\n"),
    (84.0, "[25.00%] ·· Building for virtualenv-py3.11\n"),
    (86.0, "[25.00%] ·· Benchmarking virtualenv-py3.11\n"),
    (90.0, "[26.00%] ··· ...x.time_wall           8.74±2μs\n"),
    (130.0, "[27.00%] ··· Setting up measure.callgrind.metric:45                          ok\n"),
    (131.0, "[28.00%] ··· ...x.track_instructions           40860.25\n"),
    (133.0, "==> [4/5] publishing the site  (+113 s)\n"),
    (135.0, "benchkit main finished in 2.3 min (135 s)\n"),
]


def test_step_three_is_cut_into_switches_setups_and_running() -> None:
    phases = profile_main_job.log_phases(TIMELINE)
    assert phases == {
        profile_main_job.LOG_BEFORE: 20.0,
        profile_main_job.LOG_SWITCH: 5.0 + 6.0,
        profile_main_job.LOG_ROUNDS: 2,
        "wall-time cases' setup (setup_cache), every round": 30.0,
        "Callgrind batch (setup_cache), every round": 40.0,
        profile_main_job.LOG_RUNNING: 5.0 + 4.0 + 3.0,
    }
    # every second of step 3 lands in one phase
    assert sum(v for k, v in phases.items() if k != profile_main_job.LOG_ROUNDS) == 133.0 - 20.0


def test_a_log_without_step_three_has_no_phases() -> None:
    assert profile_main_job.log_phases(TIMELINE[:1]) == {}


def test_the_table_shows_the_newest_profiles_and_says_how_it_was_made() -> None:
    """main-job-profile.md is the newest comparison, not every profile ever kept."""
    kept = json.loads(profile_main_job.PROFILES.read_text())
    text = profile_main_job.table(kept[-2:])
    assert "`python -m lab.profile_main_job table --last 2`" in text
    header = next(line for line in text.splitlines() if line.startswith("| phase (seconds)"))
    assert header.count(" | ") == 2  # two columns: the newest two profiles
    assert all(f"{p['label']} `{p['commit'][:8]}`" in header for p in kept[-2:])


def test_benchkits_own_wall_time_rounds_are_read_from_the_jobs_lines() -> None:
    log = (
        "    2 build(s) prepared for the wall-time rounds in 41 s\n"
        "    the wall-time rounds took 160 s, 70 s of it in timed samples (44%)\n"
        "    1 build(s) prepared for the wall-time rounds in 3 s\n"
        "    the wall-time rounds took 40 s, 20 s of it in timed samples (50%)\n"
    )
    assert profile_main_job.batch_phases(log) == {
        profile_main_job.BATCH_ROUNDS: 200.0,
        profile_main_job.BATCH_SAMPLED: 90.0,
        profile_main_job.BATCH_PREPARED: 44.0,
    }
    assert profile_main_job.batch_phases("asv measured every round") == {}
