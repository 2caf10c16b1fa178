"""The command line as a new user meets it: the main commands first with examples, and a typo
answered with the close name instead of the full list."""

from __future__ import annotations

import pytest

from roboswe.cli import main


def test_help_lists_the_main_commands_first_with_examples(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["--help"])
    assert stop.value.code == 0
    out = capsys.readouterr().out
    listed = [line.split()[0] for line in out.splitlines() if line.startswith("    ") and not line.startswith("     ")]
    assert listed[:6] == ["demo", "run", "report", "view", "compare", "leaderboard"], listed
    examples = out[out.index("examples:"):]
    for command in ("demo", "run", "report", "view", "compare", "leaderboard"):
        assert f"roboswe {command} " in examples


@pytest.mark.parametrize(("argv", "said"), [
    (["lederboard", "runs/a"], "unknown command 'lederboard' (did you mean 'leaderboard'?)"),
    (["xyzzy"], "unknown command 'xyzzy' (`roboswe --help` lists the commands)"),
])
def test_an_unknown_command_gets_the_close_name(argv, said, capsys):
    assert main(argv) == 2
    assert said in capsys.readouterr().err


def test_an_unknown_task_id_gets_the_close_name(tmp_path, capsys):
    script = tmp_path / "a.py"
    script.write_text("print(1)\n")
    assert main(["exec", "lift-pand", str(script)]) == 2
    err = capsys.readouterr().err
    assert "task 'lift-pand' is not in dataset 'robosuite-pilot' (did you mean 'lift-panda'?)" in err


def test_a_dataset_of_ones_own_with_its_manifests_beside_it(tmp_path):
    import shutil

    from roboswe.configs import CONFIGS_DIR
    from roboswe.sim.manifest import ManifestError, load_dataset

    shipped, shipped_manifests = load_dataset("robosuite-pilot")
    mine = tmp_path / "my-set"
    mine.mkdir()
    (mine / "mine.toml").write_text('id = "mine"\ndescription = "two pilot tasks"\ntasks = ["lift-panda", "stack-panda"]\n')
    for task in ("lift-panda", "stack-panda"):
        shutil.copyfile(CONFIGS_DIR / "tasks" / f"{task}.toml", mine / f"{task}.toml")
    dataset, manifests = load_dataset(mine / "mine.toml")
    assert dataset.id == "mine" and [m.id for m in manifests] == ["lift-panda", "stack-panda"]
    assert [m.digest() for m in manifests] == [m.digest() for m in shipped_manifests[:2]]
    (mine / "stack-panda.toml").unlink()
    with pytest.raises(ManifestError, match="stack-panda"):
        load_dataset(mine / "mine.toml")
    (mine / "lift-panda.toml").unlink()
    with pytest.raises(ManifestError, match="no manifest lift-panda.toml for its first task in"):
        load_dataset(mine / "mine.toml")
    with pytest.raises(ManifestError, match=r"not found \(did you mean 'robosuite-pilot'"):
        load_dataset("robosuite-pilo")
