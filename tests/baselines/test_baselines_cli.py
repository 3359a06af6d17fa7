"""`python -m baselines TASK --inputs DIR --system NAME --out DIR`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from baseline_support import TASKS, write_synthetic_release

from baselines.__main__ import main
from evaluation import load_inputs, load_task, read_run_files, validate_run


@pytest.mark.parametrize("task_name", TASKS)
def test_cli_writes_a_valid_run_folder(task_name: str, tmp_path: Path, capsys) -> None:
    release = write_synthetic_release(task_name, tmp_path / "release")
    out = tmp_path / "run"
    meta_file = tmp_path / "meta.json"
    code = main([task_name, "--inputs", str(release), "--system", "lcs", "--out", str(out),
                 "--metadata", str(meta_file), "--no-progress", "--json"])
    assert code == 0
    task = load_task(task_name)
    inputs = load_inputs(task, release)
    files = read_run_files(out)
    assert sorted(files) == sorted(task.run_filename(d) for d in inputs)
    assert validate_run(task, files, inputs).ok
    printed = json.loads(capsys.readouterr().out)
    assert printed == json.loads(meta_file.read_text())
    assert printed["system"] == "lcs" and printed["n_pairs"] == 6 * len(inputs)


def test_cli_prints_one_line_unless_asked_for_json(tmp_path: Path, capsys) -> None:
    release = write_synthetic_release("sts2012", tmp_path / "release")
    assert main(["sts2012", "--inputs", str(release), "--system", "dice", "--out",
                 str(tmp_path / "run"), "--no-progress"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1 and lines[0].startswith("dice: ") and str(tmp_path / "run") in lines[0]


def test_cli_subset_of_datasets_and_seeded_random(tmp_path: Path) -> None:
    release = write_synthetic_release("semrel2024", tmp_path / "release")
    args = ["semrel2024", "--inputs", str(release), "--system", "random", "--seed", "5",
            "--datasets", "eng", "amh", "--no-progress"]
    assert main([*args, "--out", str(tmp_path / "a")]) == 0
    assert main([*args, "--out", str(tmp_path / "b")]) == 0
    a, b = read_run_files(tmp_path / "a"), read_run_files(tmp_path / "b")
    assert sorted(a) == ["pred_amh.csv", "pred_eng.csv"] and a == b


def test_cli_reports_missing_inputs(tmp_path: Path, capsys) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    code = main(["sts2012", "--inputs", str(empty), "--system", "dice", "--out",
                 str(tmp_path / "out"), "--no-progress"])
    assert code == 2
    assert "no input files of task sts2012" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_cli_reports_an_unknown_task_without_a_traceback(tmp_path: Path, capsys) -> None:
    code = main(["sts2099", "--inputs", str(tmp_path), "--system", "dice", "--out",
                 str(tmp_path / "out"), "--no-progress"])
    assert code == 2
    assert "unknown task 'sts2099'" in capsys.readouterr().err


def test_cli_reports_a_bad_input_line(tmp_path: Path, capsys) -> None:
    release = write_synthetic_release("sts2012", tmp_path / "release")
    (release / "STS.input.MSRvid.txt").write_text("one\ttwo\nonly one field\n")
    code = main(["sts2012", "--inputs", str(release), "--system", "dice", "--out",
                 str(tmp_path / "out"), "--no-progress"])
    assert code == 2
    err = capsys.readouterr().err
    assert "STS.input.MSRvid.txt, line 2" in err


def test_cli_cuda_without_a_gpu_is_a_clean_error(tmp_path: Path, capsys) -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    release = write_synthetic_release("sts2012", tmp_path / "release")
    code = main(["sts2012", "--inputs", str(release), "--system", "embedding", "--device",
                 "cuda", "--out", str(tmp_path / "out"), "--no-progress"])
    assert code == 2
    assert "torch.cuda.is_available() is False" in capsys.readouterr().err
