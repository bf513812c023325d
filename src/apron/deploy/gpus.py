"""GPU names as deployment tools write them, mapped to Apron's catalog (hardware/gpus.json).

Sources: SkyPilot's accelerator names (sky/catalog, `sky show-gpus`; its bare A100 is the 40 GB
card); GKE's `cloud.google.com/gke-accelerator` values and GCE accelerator-optimised machine
families (cloud.google.com/compute/docs/gpus); EC2 GPU instance families and Karpenter's
`karpenter.k8s.aws/instance-gpu-name` (aws.amazon.com/ec2/instance-types/#Accelerated_Computing);
NVIDIA GPU feature discovery's `nvidia.com/gpu.product` (the device name with blanks as dashes).
"""

from __future__ import annotations

import re

H100 = "NVIDIA H100 80GB HBM3"
A100_80 = "NVIDIA A100-SXM4-80GB"
A100_40 = "NVIDIA A100-SXM4-40GB"

SKYPILOT = {
    "H100": H100,
    "H100-MEGA": H100,
    "H100-NVL": "NVIDIA H100 NVL",
    "H200": "NVIDIA H200",
    "B200": "NVIDIA B200",
    "A100-80GB": A100_80,
    "A100": A100_40,
    "L4": "NVIDIA L4",
    "L40S": "NVIDIA L40S",
    "L40": "NVIDIA L40",
    "A10G": "NVIDIA A10G",
    "A10": "NVIDIA A10",
    "RTX4090": "NVIDIA GeForce RTX 4090",
    "RTX3090": "NVIDIA GeForce RTX 3090",
    "RTX5090": "NVIDIA GeForce RTX 5090",
    "A6000": "NVIDIA RTX A6000",
    "RTX6000-Ada": "NVIDIA RTX 6000 Ada Generation",
    "T4": "Tesla T4",
    "V100-32GB": "Tesla V100-SXM2-32GB",
}
GKE_ACCELERATOR = {
    "nvidia-h100-80gb": H100,
    "nvidia-h100-mega-80gb": H100,
    "nvidia-h200-141gb": "NVIDIA H200",
    "nvidia-b200": "NVIDIA B200",
    "nvidia-a100-80gb": A100_80,
    "nvidia-tesla-a100": A100_40,
    "nvidia-l4": "NVIDIA L4",
    "nvidia-tesla-t4": "Tesla T4",
}
# instance family (the part of the instance type before the first '.' or the size) -> GPU
INSTANCE_FAMILY = {
    "g4dn": "Tesla T4",
    "g5": "NVIDIA A10G",
    "g6": "NVIDIA L4",
    "g6e": "NVIDIA L40S",
    "p4d": A100_40,
    "p4de": A100_80,
    "p5": H100,
    "p5e": "NVIDIA H200",
    "p5en": "NVIDIA H200",
    "p6-b200": "NVIDIA B200",
    "a2-highgpu": A100_40,
    "a2-megagpu": A100_40,
    "a2-ultragpu": A100_80,
    "a3-highgpu": H100,
    "a3-megagpu": H100,
    "a3-edgegpu": H100,
    "a3-ultragpu": "NVIDIA H200",
    "a4-highgpu": "NVIDIA B200",
    "g2-standard": "NVIDIA L4",
}
KARPENTER_GPU_NAME = {
    "t4": "Tesla T4",
    "a10g": "NVIDIA A10G",
    "l4": "NVIDIA L4",
    "l40s": "NVIDIA L40S",
    "a100": A100_40,  # p4d; p4de names the same GPU with 80 GB: the instance family tells them apart
    "h100": H100,
    "h200": "NVIDIA H200",
    "b200": "NVIDIA B200",
}
GPU_LABELS = (
    "cloud.google.com/gke-accelerator",
    "nvidia.com/gpu.product",
    "karpenter.k8s.aws/instance-family",
    "karpenter.k8s.aws/instance-gpu-name",
    "node.kubernetes.io/instance-type",
    "beta.kubernetes.io/instance-type",
)


def family(instance_type: str) -> str:
    """p4d.24xlarge -> p4d; a3-highgpu-8g -> a3-highgpu; g2-standard-24 -> g2-standard."""
    if "." in instance_type:
        return instance_type.split(".")[0]
    return re.sub(r"-\d+g?$", "", instance_type)


def from_label(label: str, value: str) -> str | None:
    """The catalog name a node label names, or None (an unknown value: the candidate says so)."""
    if label == "cloud.google.com/gke-accelerator":
        return GKE_ACCELERATOR.get(value)
    if label == "nvidia.com/gpu.product":
        return (
            value.replace("-", " ").replace("NVIDIA A100 SXM4 80GB", A100_80).replace("NVIDIA A100 SXM4 40GB", A100_40)
        )
    if label == "karpenter.k8s.aws/instance-gpu-name":
        return KARPENTER_GPU_NAME.get(value.lower())
    return INSTANCE_FAMILY.get(family(value))
