"""Hub names (mtkit/hub.py): the Hugging Face cache layout is built here, since the Hub cannot be reached."""

from __future__ import annotations

import pytest

from tests.support.cli import error_line
from tests.support.opus import hub_cache

pytest.importorskip("huggingface_hub")

REPO = "Helsinki-NLP/opus-mt-en-de"


def cache_with(tmp_path, opus_dir, revision="main"):
    """HF_HUB_CACHE holding REPO at `revision` (tests/support/opus.py)."""
    return hub_cache(tmp_path / "hub", REPO, opus_dir, revision)


def test_a_cached_hub_name_translates_offline_as_its_directory(cli, opus_dir, tmp_path):
    cache = cache_with(tmp_path, opus_dir)
    env = {"HF_HUB_CACHE": str(cache), "HF_HUB_OFFLINE": "1"}
    text = "A dog runs.\nTwo men talk.\n"
    by_name = cli("translate", "-m", REPO, "--beam", "2", input=text, env=env)
    by_dir = cli("translate", "-m", opus_dir, "--beam", "2", input=text)
    assert by_name.returncode == 0, by_name.stderr
    assert by_name.stdout == by_dir.stdout
    assert cli("info", REPO, env=env).returncode == 0


def test_a_revision_reads_its_own_ref(cli, opus_dir, tmp_path):
    cache = cache_with(tmp_path, opus_dir, revision="v1")
    env = {"HF_HUB_CACHE": str(cache), "HF_HUB_OFFLINE": "1"}
    assert cli("translate", "-m", REPO, "--revision", "v1", input="A dog.\n", env=env).returncode == 0
    line = error_line(cli("translate", "-m", REPO, input="A dog.\n", env=env))
    assert f"{REPO} (revision main) is not in the Hugging Face cache and HF_HUB_OFFLINE is set" in line


def test_a_missing_model_is_one_sentence_with_or_without_a_network(cli, tmp_path):
    env = {"HF_HUB_CACHE": str(tmp_path / "empty")}
    line = error_line(cli("translate", "-m", "nobody-here/no-such-model", input="A dog.\n", env=env))
    assert "nobody-here/no-such-model" in line and "Hugging Face" in line


def test_a_revision_with_a_local_path_is_one_sentence(cli, opus_dir):
    line = error_line(cli("translate", "-m", opus_dir, "--revision", "v1", input="A dog.\n"))
    assert "--revision applies to Hugging Face Hub names" in line


def test_the_python_api_reads_a_hub_name_from_the_cache(opus_dir, tmp_path, monkeypatch):
    """`mtkit.load_translator("owner/name")` asks mtkit/sources/ as the commands do: the cached snapshot."""
    import mtkit

    monkeypatch.setenv("HF_HUB_CACHE", str(cache_with(tmp_path, opus_dir)))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    by_name = mtkit.load_translator(REPO, device="cpu").translate(["A dog runs."], beam=2)
    by_dir = mtkit.load_translator(str(opus_dir), device="cpu").translate(["A dog runs."], beam=2)
    assert by_name == by_dir


def test_a_mistyped_local_path_is_not_taken_for_a_hub_name(cli, tmp_path):
    (tmp_path / "runs").mkdir()
    done = cli("info", "runs/smal", cwd=tmp_path)
    assert done.returncode != 0
    line = error_line(done)
    assert "does not exist" in line and "Hugging Face" not in line
