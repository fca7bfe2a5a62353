"""The README's test command is what CI runs."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    commands = [line for line in readme.splitlines() if line.startswith("pip install torch==2.13.0")]
    assert len(commands) == 1
    assert commands[0] in ci.splitlines()


def test_readme_main_command_is_a_predict():
    readme = (ROOT / "README.md").read_text()
    assert any(
        line.startswith("pip install -e . && queuesgd predict --scheme async-ps")
        for line in readme.splitlines()
    )
