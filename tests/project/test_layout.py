"""The package's layout: subpackages by purpose, and no module that imports, directly or through others, a
module that imports it back (an import circle makes the order of first imports matter)."""
import ast
import pathlib

from conftest import REPO

PACKAGE = REPO / "hvd_dqn"


def module_name(path: pathlib.Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: pathlib.Path, modules: set) -> set:
    """The hvd_dqn modules `path` imports anywhere in its body (function-level imports included)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found & modules


def import_graph() -> dict:
    paths = {module_name(path): path for path in PACKAGE.rglob("*.py")}
    modules = set(paths)
    return {name: imports_of(path, modules) - {name} for name, path in paths.items()}


def circles(graph: dict) -> list:
    """Every import circle, each as the list of modules around it (depth-first search)."""
    found, state = [], {}

    def visit(module, trail):
        state[module] = "open"
        for imported in sorted(graph[module]):
            if state.get(imported) == "open":
                found.append(trail[trail.index(imported):] + [imported])
            elif imported not in state:
                visit(imported, trail + [imported])
        state[module] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    return found


def test_no_import_circles():
    assert circles(import_graph()) == []


def test_the_circle_finder_finds_a_circle():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c", "a"]]


def test_subpackages_by_purpose_each_say_what_they_hold():
    subpackages = sorted(path.parent.name for path in PACKAGE.glob("*/__init__.py"))
    assert subpackages == ["agent", "baselines", "logdir", "measure", "memories", "plan", "reports", "run", "tools"]
    for name in subpackages:
        assert ast.get_docstring(ast.parse((PACKAGE / name / "__init__.py").read_text())), \
            f"hvd_dqn/{name}/__init__.py says nothing of what it holds"


# The rooms from the bottom up (docs/architecture.md, "Rooms"): a module imports only from its own level or below.
# Level 0 imports no other room; the config and the rank split know no agent (an agent's own settings reach them
# as an object of its settings class), the agents and the flags know the config; the commands, measuring,
# planning and reports sit above the loop they start or read; hvd_dqn/tools/ (the old command names) on top.
LEVELS = [
    ["", "baselines", "cli", "collectives", "cpus", "quiet_tensorflow", "settings", "text"],
    ["envs", "logdir", "memories"],
    ["config", "rank_split"],
    ["agent", "flags"],
    ["run"],
    ["evaluate", "export", "ray_train", "reports", "runner", "spark_train", "train"],
    ["measure"],
    ["plan"],
    ["tools"],
]
LEVEL_OF = {room: level for level, rooms in enumerate(LEVELS) for room in rooms}


def room_of(module: str) -> str:
    """hvd_dqn.agent.dqn.learner -> agent; hvd_dqn.train -> train; hvd_dqn -> "" (the package's own __init__)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def arrows_up(graph: dict) -> list:
    """Every import of a module in a room above the importer's, as "importer -> imported"."""
    return [f"{module} -> {imported}" for module in sorted(graph) for imported in sorted(graph[module])
            if LEVEL_OF[room_of(imported)] > LEVEL_OF[room_of(module)]]


def test_every_room_has_its_level():
    assert sorted({room_of(module) for module in import_graph()} - set(LEVEL_OF)) == []


def test_no_import_runs_back_up():
    """The agents import nothing of the loop, a run's files nothing of the agents, the loop nothing of the commands."""
    assert arrows_up(import_graph()) == []


def test_the_arrow_finder_finds_an_arrow_up():
    graph = {"hvd_dqn.agent.dqn.agent": {"hvd_dqn.run.trainer", "hvd_dqn.collectives"},
             "hvd_dqn.logdir.checkpoint": {"hvd_dqn.agent.factory"}, "hvd_dqn.run.trainer": {"hvd_dqn.agent.factory"}}
    assert arrows_up(graph) == ["hvd_dqn.agent.dqn.agent -> hvd_dqn.run.trainer",
                                "hvd_dqn.logdir.checkpoint -> hvd_dqn.agent.factory"]


def test_no_room_holds_above_a_third_of_the_package():
    lines = {}
    for path in PACKAGE.rglob("*.py"):
        room = path.relative_to(PACKAGE).parts[0] if len(path.relative_to(PACKAGE).parts) > 1 else path.name
        lines[room] = lines.get(room, 0) + len(path.read_text().splitlines())
    total = sum(lines.values())
    assert {room: count for room, count in lines.items() if count > total / 3} == {}


MAX_MODULE_LINES = 400  # a module longer than this holds more than one idea; split it by purpose


def test_no_module_is_longer_than_400_lines():
    lengths = {str(path.relative_to(REPO)): len(path.read_text().splitlines()) for path in PACKAGE.rglob("*.py")}
    assert {path: length for path, length in lengths.items() if length > MAX_MODULE_LINES} == {}


MAX_PARAMETERS = 10  # a function that needs more takes a config (or a small dataclass) instead


def test_no_function_takes_more_than_10_parameters():
    crowded = []
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                arguments = node.args
                names = [argument.arg for argument in arguments.posonlyargs + arguments.args + arguments.kwonlyargs]
                count = len(names) - (names[:1] in (["self"], ["cls"])) + bool(arguments.vararg) + bool(arguments.kwarg)
                if count > MAX_PARAMETERS:
                    crowded.append(f"{path.relative_to(REPO)}:{node.lineno} {node.name} ({count})")
    assert crowded == []


def test_the_run_machinery_knows_the_agents_only_through_their_interface():
    """DQN, QR-DQN, IQN and PQN live whole under their folders of agent/; no module of run/ imports any:
    the trainer, checkpoints, metrics, stopping and the memory pre-flight ask the agent (agent/interface.py), which
    the factory (agent/factory.py) builds from its registry entry."""
    graph = import_graph()
    agents = {name for name in graph if name.startswith(("hvd_dqn.agent.dqn", "hvd_dqn.agent.pqn",
                                                          "hvd_dqn.agent.qrdqn", "hvd_dqn.agent.iqn"))}
    assert {"hvd_dqn.agent.dqn.agent", "hvd_dqn.agent.pqn.agent", "hvd_dqn.agent.qrdqn.agent",
            "hvd_dqn.agent.iqn.agent"} <= agents
    reaching = {module: sorted(graph[module] & agents) for module in graph if module.startswith("hvd_dqn.run")}
    assert {module: imported for module, imported in reaching.items() if imported} == {}
    assert "hvd_dqn.agent.factory" in graph["hvd_dqn.run.trainer"]


def test_nothing_outside_the_agents_imports_an_agents_folder():
    """Measuring, planning, reports, export and the loop build memories, learners and networks through the factory
    (agent/factory.py) and the agent's class; the arithmetic of an agent's share of a job lives in its folder
    (agent/pqn/rank_share.py), asked through its settings class; config.py and rank_split.py import nothing of
    agent/ at all."""
    from hvd_dqn.agent import registry

    graph = import_graph()
    folders = tuple(registry.BUILT_IN)
    reaching = {module: sorted(imported for imported in graph[module] if imported.startswith(folders))
                for module in graph if not module.startswith("hvd_dqn.agent")}
    assert {module: imported for module, imported in reaching.items() if imported} == {}
    for module in ("hvd_dqn.config", "hvd_dqn.rank_split"):
        assert not {imported for imported in graph[module] if imported.startswith("hvd_dqn.agent")}, module



def test_every_module_is_named_where_docs_architecture_says_where_things_live():
    """A module of a subpackage is named (`trainer`) in its subpackage's row; one at the top by its file name."""
    table = (REPO / "docs" / "architecture.md").read_text().split("## Where things live", 1)[1]
    rows = [line for line in table.splitlines() if line.startswith("| `hvd_dqn/")]
    top = "\n".join(row.split(" | ")[0] for row in rows)
    unnamed = []
    for path in PACKAGE.rglob("*.py"):
        if path.name == "__init__.py":
            continue
        parts = path.relative_to(PACKAGE).parts
        if len(parts) == 1:
            named = path.name in top
        else:
            row = next((row for row in rows if row.startswith(f"| `hvd_dqn/{parts[0]}/`")), "")
            named = f"`{path.stem}`" in row
        if not named:
            unnamed.append(str(path.relative_to(REPO)))
    assert unnamed == []


def _names_a_configs_agent(node) -> bool:
    """`config.agent`, `self.config.agent`, `saved_config.agent`: the --agent setting of a config."""
    if not (isinstance(node, ast.Attribute) and node.attr == "agent"):
        return False
    owner = node.value
    name = owner.id if isinstance(owner, ast.Name) else owner.attr if isinstance(owner, ast.Attribute) else ""
    return name.endswith("config")


def _is_string(node) -> bool:
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return any(_is_string(element) for element in node.elts)
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


def _is_an_agents_name(node, names) -> bool:
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return any(_is_an_agents_name(element, names) for element in node.elts)
    return isinstance(node, ast.Constant) and node.value in names


def agent_name_checks() -> list:
    """Every place outside agent/ that compares a config's --agent with a name (`config.agent == "pqn"`), or anything
    with a registered agent's name (`agent == "c51"`, `loop.agent in ("dqn",)`)."""
    from hvd_dqn.agent import registry

    names = {entry.name for entry in registry.entries()}
    found = []
    for path in PACKAGE.rglob("*.py"):
        if path.is_relative_to(PACKAGE / "agent"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Compare):
                operands = [node.left, *node.comparators]
                if (any(map(_names_a_configs_agent, operands)) and any(map(_is_string, operands))
                        or any(_is_an_agents_name(operand, names) for operand in operands)):
                    found.append(f"{path.relative_to(REPO)}:{node.lineno}")
    return found


def test_no_code_outside_the_agents_asks_which_agent_runs():
    """The registry (agent/registry.py) and the agents' own folders alone know the agents by name; the rest asks
    the agent's entry or class (agent/factory.py) what it needs: a replay memory or a rollout, acting ahead, its
    network and greedy Q-values, its memory's size."""
    assert agent_name_checks() == []


def test_the_agent_name_check_finds_a_comparison():
    module = PACKAGE / "run" / "_probe_agent_name_check.py"
    module.write_text('def f(config, agent):\n    return config.agent == "pqn" or self.config.agent in ("dqn",)\n'
                      'def g(agent):\n    return agent == "c51"\n')
    try:
        assert sorted(agent_name_checks()) == [f"{module.relative_to(REPO)}:2"] * 2 + [f"{module.relative_to(REPO)}:4"]
    finally:
        module.unlink()


def test_the_tests_are_laid_out_like_the_package():
    """A room's tests are in tests/<room>/ (the top-level modules' at tests/'s top; the project's own, such as this
    file, in tests/project/): every folder of tests that holds test files is a room of the package or the project."""
    rooms = {path.parent.name for path in PACKAGE.glob("*/__init__.py")}
    folders = {path.parent.name for path in (REPO / "tests").glob("*/test_*.py")}
    assert folders - rooms == {"project"}
    assert not list((REPO / "tests").glob("*/*/test_*.py"))  # one level, as the package's rooms
