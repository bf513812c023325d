"""Local folders and snapshots give the same Checkpoint, read from headers only."""

from __future__ import annotations

import pytest

from apron.checkpoint import load_checkpoint
from conftest import materialize, snapshot_document, snapshot_names, snapshot_path


@pytest.mark.parametrize("name", snapshot_names())
def test_folder_and_snapshot_agree(name, tmp_path):
    folder = materialize(name, tmp_path / "ckpt")
    from_folder = load_checkpoint(str(folder))
    from_snapshot = load_checkpoint(str(snapshot_path(name)))
    assert sorted(t.name for t in from_folder.tensors) == sorted(t.name for t in from_snapshot.tensors)
    assert from_folder.total_tensor_bytes == from_snapshot.total_tensor_bytes
    checks = snapshot_document(name)["checks"]
    assert from_folder.total_tensor_bytes == checks["total_bytes"]
    assert from_folder.architecture == from_snapshot.architecture


def test_unindexed_consolidated_file_is_skipped(tmp_path):
    folder = materialize("mistralai/Mistral-7B-Instruct-v0.3", tmp_path / "m")
    assert (folder / "consolidated.safetensors").exists()
    ckpt = load_checkpoint(str(folder))
    assert "consolidated.safetensors" not in ckpt.files
    assert ckpt.total_tensor_bytes == 14_496_047_104


def test_folder_reads_only_header_bytes(tmp_path):
    folder = materialize("Qwen/Qwen3-8B", tmp_path / "q")
    ckpt = load_checkpoint(str(folder))
    header_bytes = 0
    for f in folder.glob("*.safetensors"):
        with open(f, "rb") as handle:
            header_bytes += 8 + int.from_bytes(handle.read(8), "little")
    small_files = sum((folder / n).stat().st_size for n in ("config.json",))
    assert ckpt.header_bytes_read == header_bytes + small_files


def test_a_hugging_face_cache_snapshot_of_symlinks_reads_like_the_folder(tmp_path):
    """snapshots/<sha>/* link to ../../blobs/<hash>: every link that reaches a file is that file."""
    folder = materialize("Qwen/Qwen3-0.6B", tmp_path / "plain")
    plain = load_checkpoint(str(folder))
    blobs, snapshot = tmp_path / "hub" / "blobs", tmp_path / "hub" / "snapshots" / ("b" * 40)
    blobs.mkdir(parents=True)
    snapshot.mkdir(parents=True)
    for index, entry in enumerate(sorted(folder.iterdir())):
        blob = blobs / f"{index:064x}"
        entry.rename(blob)  # sparse shards: moved, never copied
        (snapshot / entry.name).symlink_to(f"../../blobs/{blob.name}")
    linked = load_checkpoint(str(snapshot))
    assert linked.total_tensor_bytes == plain.total_tensor_bytes and linked.files == plain.files
    assert linked.config == plain.config and linked.tokenizer_config == plain.tokenizer_config
