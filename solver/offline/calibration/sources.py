"""The measured sources and how they map onto the model: where the data is, the GPU types
and families that stand for the measured ones, training FLOPs per sample and the arithmetic
each run used."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from solver import resources
from solver.domain import GpuType
from solver.offline.generate import GAVEL_PARAMETERS, POLLUX_PARAMETERS
from solver.perfmodel.catalog import load_gpu_catalog

DATA_DIR = resources.data_dir()
"""The bundled ``data/`` (the repository's in a checkout; see ``solver.resources``)."""

FP32_PEAK_TFLOPS: Mapping[str, float] = {
    "K80": 4.365,
    "P100-16GB": 9.3,
    "V100-16GB": 14.0,
    "T4": 8.1,
}
"""Single-precision (FP32 CUDA-core) peaks, NVIDIA datasheets: Tesla K80 board 8.73 TFLOP/s at
GPU Boost for two GK210, halved; Tesla P100 PCIe 9.3; V100 PCIe 14; T4 8.1."""

GAVEL_TYPES: Mapping[str, str] = {"k80": "K80", "p100": "P100-16GB", "v100": "V100-16GB"}
"""Gavel's GPU names -> the catalog types that stand for them (as ``solver.offline.generate``)."""
FAMILIES: Mapping[str, str] = {"K80": "K80", "P100-16GB": "P100", "V100-16GB": "V100", "T4": "T4"}
"""Catalog type -> the family key of ``models/calibration.json`` (``solver.perfmodel.families``)."""

POLLUX_GPU = "T4"
POLLUX_GPUS_PER_NODE = 4
POLLUX_NETWORK_GBPS = 50.0
"""Pollux's testbed: AWS g4dn.12xlarge, 4 T4 each, 50 Gbit/s, one placement group (Qiao et al.
2021, sec. 5; petuum/adaptdl ``benchmark/main.tf``)."""
GRADIENT_BYTES_PER_PARAMETER = 4
"""Gavel and Pollux train FP32 weights (Pollux's ImageNet uses apex AMP O1, which keeps FP32
weights): the gradient all-reduce moves 4 bytes per parameter (the service's model: 2, bf16)."""
SEQUENCE_BERT = 384
"""Pollux's BERT fine-tunes on SQuAD at max_seq_length 384 (adaptdl ``benchmark/models/bert``)."""
BPTT_LM = 35
"""Gavel's LM trains on 35-token sequences (``--bptt`` default of its word_language_model)."""


def _conv_macs(c_in: int, c_out: int, kernel: int, out_size: int) -> int:
    return kernel * kernel * c_in * c_out * out_size * out_size


def resnet_macs(depths: Sequence[int], bottleneck: bool, image: int, classes: int) -> int:
    """Multiply-accumulates of one forward pass of a ResNet (convolutions and the classifier).

    CIFAR variant (``image=32``, kuangliu/pytorch-cifar): a 3x3 stem at full resolution. ImageNet
    variant (torchvision): a 7x7 stride-2 stem and a max-pool. Stride 2 on the 3x3 convolution
    of each stage's first block (ResNet v1.5); a 1x1 projection where the shape changes.
    """
    widths = (64, 128, 256, 512)
    expansion = 4 if bottleneck else 1
    if image <= 64:
        size = image
        macs = _conv_macs(3, 64, 3, size)
    else:
        macs = _conv_macs(3, 64, 7, image // 2)
        size = image // 4
    c_in = 64
    for stage, (width, depth) in enumerate(zip(widths, depths, strict=True)):
        for block in range(depth):
            stride = 2 if block == 0 and stage > 0 else 1
            out = size // stride
            c_out = width * expansion
            if bottleneck:
                macs += _conv_macs(c_in, width, 1, size)
                macs += _conv_macs(width, width, 3, out) + _conv_macs(width, c_out, 1, out)
            else:
                macs += _conv_macs(c_in, width, 3, out) + _conv_macs(width, width, 3, out)
            if stride != 1 or c_in != c_out:
                macs += _conv_macs(c_in, c_out, 1, out)
            c_in, size = c_out, out
    return macs + c_in * classes


def lstm_lm_macs_per_token(hidden: int, layers: int, vocabulary: int) -> int:
    """An LSTM language model: 4 gates of (input + hidden) x hidden per layer, then the decoder."""
    return layers * 4 * hidden * (hidden + hidden) + hidden * vocabulary


RESNET18_CIFAR_MACS = resnet_macs((2, 2, 2, 2), bottleneck=False, image=32, classes=10)
RESNET50_MACS = resnet_macs((3, 4, 6, 3), bottleneck=True, image=224, classes=1000)
LM_MACS_PER_TOKEN = lstm_lm_macs_per_token(200, 2, 33_278)

TRAIN_FLOPS_PER_SAMPLE: Mapping[str, float] = {
    "ResNet-18": 6.0 * RESNET18_CIFAR_MACS,
    "ResNet-50": 6.0 * RESNET50_MACS,
    "LM": 6.0 * LM_MACS_PER_TOKEN * BPTT_LM,
    "cifar10": 6.0 * RESNET18_CIFAR_MACS,
    "imagenet": 6.0 * RESNET50_MACS,
    "bert": 6.0 * POLLUX_PARAMETERS["bert"] * SEQUENCE_BERT,
}
"""Training FLOPs per sample: forward and backward = 3 forward passes of 2 FLOPs per MAC (the
rule behind the service's 6 x parameters x tokens). BERT uses the service's transformer rule
itself (6 x 110M x 384 tokens, attention left out as in ``solver.perfmodel.throughput``). No
established count for Gavel's Transformer (Multi30k sentence lengths), Recommendation, A3C and
CycleGAN, Pollux's YOLOv3 (multi-scale input) or NCF (embedding lookups): they are not used for
efficiency."""

PRECISION: Mapping[tuple[str, str], str] = {
    ("gavel", "ResNet-18"): "fp32",
    ("gavel", "ResNet-50"): "fp32",
    ("gavel", "LM"): "fp32",
    ("pollux", "cifar10"): "fp32",
    ("pollux", "bert"): "fp32",
    ("pollux", "imagenet"): "mixed",
}
"""The arithmetic each run used (the training scripts in stanford-futuredata/gavel and
petuum/adaptdl): FP32 everywhere except Pollux's ImageNet (apex AMP O1, tensor cores)."""


def peak_tflops(gpu: GpuType, precision: str) -> float:
    """The peak of the arithmetic a run used: the catalog's 16-bit peak, or the FP32 one."""
    return gpu.peak_tflops if precision == "mixed" else FP32_PEAK_TFLOPS[gpu.name]


def peaks_summary() -> dict[str, dict[str, float]]:
    """The catalog's 16-bit peak and the FP32 peak of each measured type (TFLOP/s)."""
    catalog = load_gpu_catalog()
    return {
        t: {"catalog_16bit": catalog[t].peak_tflops, "fp32": v} for t, v in FP32_PEAK_TFLOPS.items()
    }


def mapping_summary() -> dict[str, Any]:
    """How each measured network maps onto the model: gradient size, FLOPs, precision."""
    out: dict[str, Any] = {}
    for source, params in (("gavel", GAVEL_PARAMETERS), ("pollux", POLLUX_PARAMETERS)):
        for net, count in sorted(params.items()):
            flops = TRAIN_FLOPS_PER_SAMPLE.get(net)
            out[f"{source}/{net}"] = {
                "parameters": count,
                "gradient_mb": round(GRADIENT_BYTES_PER_PARAMETER * count / 1e6, 1),
                "train_gflops_per_sample": None if flops is None else round(flops / 1e9, 3),
                "precision": PRECISION.get((source, net)),
            }
    return out
