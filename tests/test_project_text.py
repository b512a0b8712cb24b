"""What the project tells its users: every figure the README quotes is found in the results/ evidence its
section names, the headline figures recompute from the raw episodes, no text speaks of the lab's history
(that is CHANGELOG.md's) or points outside the repository, and the licence is there."""
import re
import statistics
import subprocess

import pytest

from conftest import REPO

README = (REPO / "README.md").read_text()

# Words that belong to the lab notebook, not to the product: a session's number, an issue's number, "this
# session", a machine compared with another unnamed one, and files outside the repository.
NOTEBOOK = re.compile(r"\bstop[ -]?\d+|_stop\d+|\bissue \d+|\bissue's\b|\bthis session\b|\bthe slower machine\b|"
                      r"\.\./shared", re.IGNORECASE)
TEXT_SUFFIXES = {".py", ".md", ".flags", ".sh", ".sbatch", ".cfg", ".txt", ".yaml", ".yml", ".toml", ""}


def _project_files():
    listed = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    for name in listed.splitlines():
        path = REPO / name
        # CHANGELOG.md holds the history by version, this file names the words it looks for, and results' raw
        # outputs are kept as the commands printed them.
        if name in ("CHANGELOG.md", "tests/test_project_text.py") or name.startswith("deploy/mpi-operator/") \
                or not path.is_file():
            continue
        if name.startswith("results/") and path.suffix != ".md":
            continue
        if path.suffix in TEXT_SUFFIXES:
            yield name, path


def test_no_notebook_words_or_paths_outside_the_repository():
    found = []
    for name, path in _project_files():
        if NOTEBOOK.search(name):
            found.append(f"{name} (its name)")
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if NOTEBOOK.search(line):
                found.append(f"{name}:{number}: {line.strip()[:100]}")
    assert found == []


def test_the_notebook_pattern_finds_what_it_is_for():
    for text in ("since stop 43", "the stop-44 studies", "time_x_stop43.json", "Issue 31 chose", "the issue's 0.6x",
                 "measured in this session", "on the slower machine", "see ../shared/TOOLCHAIN.md"):
        assert NOTEBOOK.search(text), text
    for text in ("the ranks stop with a checkpoint", "horovod issue #4290", "one session of training"):
        assert not NOTEBOOK.search(text), text


def _sections(markdown: str):
    """(heading, text) of each section, code blocks left out (they hold commands, not figures)."""
    text = re.sub(r"```.*?```", "", markdown, flags=re.DOTALL)
    parts = re.split(r"^(#{1,3} .*)$", text, flags=re.MULTILINE)
    yield "(top)", parts[0]
    for heading, body in zip(parts[1::2], parts[2::2]):
        yield heading.strip("# "), body


# A figure: a number with thousands separators (72,992), or a decimal, maybe a ratio (0.66x, 19.2).
FIGURE = re.compile(r"(?<![\w.])(\d{1,3}(?:,\d{3})+|\d+\.\d+x?)(?![\w.])")
NOT_RESULTS = {"Installing", "On a cluster", "Where things are", "Documentation", "Tests", "Licence"}


def _evidence_text(paths) -> str:
    texts = []
    for relative in paths:
        root = REPO / relative
        files = [root] if root.is_file() else [path for path in root.rglob("*")
                                               if path.suffix in (".md", ".json", ".txt") and path.is_file()]
        texts += [path.read_text(errors="replace") for path in files]
    return "\n".join(texts)


def test_every_figure_in_the_readme_is_in_the_results_its_section_names():
    named_anywhere = sorted(set(re.findall(r"results/[\w./-]*", README)))
    missing, checked = [], 0
    for heading, body in _sections(README):
        if heading in NOT_RESULTS:
            continue
        paths = sorted(set(path.rstrip(".") for path in re.findall(r"results/[\w./-]*", body))) or named_anywhere
        assert all((REPO / path).exists() for path in paths), paths
        evidence = _evidence_text(paths)
        for figure in FIGURE.findall(body):
            checked += 1
            if figure not in evidence:
                missing.append(f"{heading}: {figure} (looked in {', '.join(paths)})")
    assert checked >= 40 and missing == []


def test_the_figure_check_would_catch_a_figure_without_evidence():
    assert FIGURE.findall("solved in 0.66x at 72,992 env steps; 9.15 +- 0.79; 1M steps, 3 seeds") == \
        ["0.66x", "72,992", "9.15", "0.79"]
    assert "0.67x" not in _evidence_text(["results/time_to_score"])


def test_the_headline_time_ratios_recompute_from_the_raw_episodes():
    """Each run's seconds to the target, from its own episodes.csv; the README's ratio of the medians."""
    from hvd_dqn.tools.study_report import read_run, wall_s_to_target

    for study, target, ranks_text in (("cartpole_2_workers", 475, "CartPole to 475"),
                                      ("minatar_breakout_2_workers", 5, "MinAtar Breakout to 5")):
        seconds = {1: [], 2: []}
        for run in sorted((REPO / "results" / "time_to_score" / f"{study}_runs").iterdir()):
            ranks = int(run.name.split("_")[0][2:])
            _, episodes = read_run(str(run))
            seconds[ranks].append(wall_s_to_target(episodes, target, 100))
        assert None not in seconds[1] + seconds[2]
        one, two = statistics.median(seconds[1]), statistics.median(seconds[2])
        assert f"| {ranks_text} | **{two / one:.2f}x** ({two:.1f} s against {one:.1f} s)" in README


@pytest.mark.parametrize("task, target, sentences", [
    ("cartpole", 475, ("in **{pqn_over_cleanrl:.2f}x** the time of CleanRL's",
                       "in {pqn_over_dqn:.2f}x the time of hvd_dqn's own DQN")),
    ("minatar_breakout", 5, ("PQN reaches 5 in **{pqn_over_dqn:.2f}x** DQN's time",)),
])
def test_the_pqn_side_by_side_recomputes_from_the_raw_episodes(task, target, sentences):
    """Each run's seconds to the target from its own episodes.csv (CleanRL's as studies/peer_episodes.py wrote
    it); the ratios of the medians the results README gives."""
    import csv

    from hvd_dqn.tools.study_report import read_run, wall_s_to_target

    seconds = {}
    for run in sorted((REPO / "results" / "pqn_side_by_side" / f"{task}_runs").iterdir()):
        config = run.name.rsplit("_seed", 1)[0]
        if config == "cleanrl_pqn":
            with open(run / "episodes.csv") as handle:
                episodes = [(int(row["env_steps"]), float(row["return"]), float(row["wall_s"]))
                            for row in csv.DictReader(handle)]
        else:
            episodes = read_run(str(run))[1]
        seconds.setdefault(config, []).append(wall_s_to_target(episodes, target, 100))
    assert all(len(values) >= 3 and None not in values for values in seconds.values())
    medians = {config: statistics.median(values) for config, values in seconds.items()}
    ratios = dict(pqn_over_dqn=medians["hvd_dqn_pqn"] / medians["hvd_dqn_dqn"])
    if "cleanrl_pqn" in medians:
        ratios["pqn_over_cleanrl"] = medians["hvd_dqn_pqn"] / medians["cleanrl_pqn"]
    text = (REPO / "results" / "pqn_side_by_side" / "README.md").read_text()
    for sentence in sentences:
        assert sentence.format(**ratios) in text


@pytest.mark.parametrize("game", ["breakout", "spaceinvaders", "freeway"])
def test_the_minatar_scores_recompute_from_the_raw_episodes(game):
    from hvd_dqn.tools.score import last_episodes
    from hvd_dqn.tools.study_report import read_run

    _, episodes = read_run(str(REPO / "results" / f"minatar_{game}"))
    mean, error, used = last_episodes(episodes, 100)
    assert used == 100 and f"| {mean:.2f} +- {error:.2f} |" in README


def test_the_score_of_a_hand_made_run():
    from hvd_dqn.tools.score import last_episodes

    episodes = [(40, 10.0), (10, 99.0), (30, 4.0), (20, 6.0)]  # by env step: 99, 6, 4, 10
    mean, error, used = last_episodes(episodes, 3)
    assert used == 3 and mean == pytest.approx(20 / 3)
    assert error == pytest.approx(statistics.stdev([6.0, 4.0, 10.0]) / 3 ** 0.5)


def test_a_licence_compatible_with_tensorflow_and_horovod():
    licence = (REPO / "LICENSE").read_text()
    assert "Apache License" in licence and "Version 2.0, January 2004" in licence
    assert "GPL-3.0" in (REPO / "docs" / "install.md").read_text()
