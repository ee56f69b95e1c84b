"""The READMEs' Python examples run as written (from the repository's root,
as they say), so they cannot rot unseen; scripts/test-python type-checks
them too (scripts/readme_snippets.py extracts them for both)."""

import importlib.util
import os
import subprocess
import sys

import pytest

from conftest import CACHE, REPO, SCIENTIFIC, wasm


def load_extractor():
    spec = importlib.util.spec_from_file_location("readme_snippets",
                                                  REPO / "scripts" / "readme_snippets.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["readme_snippets"] = module
    spec.loader.exec_module(module)
    return module


SNIPPETS = load_extractor().all_snippets()
# Those of this package (the other is a plugin's code, for the plugin SDK:
# `sandwit plugin build` builds it, not Python).
PACKAGE = [s for s in SNIPPETS if "import sandwit\n" in s.code]


def test_the_readmes_have_the_examples_this_file_runs():
    readmes = {s.readme for s in PACKAGE}
    assert readmes == {"README.md", "bindings/python/README.md"}, readmes
    assert len(PACKAGE) >= 5 and len(SNIPPETS) > len(PACKAGE)


@pytest.mark.parametrize("snippet", PACKAGE, ids=[s.module for s in PACKAGE])
def test_a_readme_example_runs_as_written(snippet, scientific_dir):
    wasm("calc")  # built where the examples load it from
    env = {**os.environ, "SANDWIT_CACHE_DIR": str(CACHE), "SANDWIT_SCIENTIFIC": str(SCIENTIFIC)}
    done = subprocess.run([sys.executable, "-c", snippet.code], cwd=REPO, capture_output=True,
                          text=True, env=env, timeout=600)
    assert done.returncode == 0, f"{snippet.readme}:{snippet.line}:\n{done.stderr}"
