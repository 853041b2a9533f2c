"""Scenarios: a user cannot switch off their GPU share's enforcement through the environment."""

from __future__ import annotations

import pytest

from gpuspawner.backends import merge_environment, strip_protected


@pytest.mark.parametrize(
    "name",
    [
        "LD_PRELOAD",
        "CUDA_DISABLE_CONTROL",
        "CUDA_DEVICE_MEMORY_LIMIT",
        "CUDA_DEVICE_MEMORY_LIMIT_0",
        "CUDA_DEVICE_SM_LIMIT",
        "CUDA_VISIBLE_DEVICES",
        "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE",
        "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT",
        "NVIDIA_VISIBLE_DEVICES",
        "GPU_CORE_UTILIZATION_POLICY",
        "RUNAI_GPU_MEMORY_LIMIT",
        "XLA_PYTHON_CLIENT_MEM_FRACTION",
        "PYTORCH_CUDA_ALLOC_CONF",
        "GPUSPAWNER_TORCH_MEMORY_FRACTION",
        "ACTIVE_OOM_KILLER",
        "ld_preload",
    ],
)
def test_given_an_enforcement_variable_from_the_user_then_it_is_dropped(name):
    assert strip_protected({name: "anything", "MY_DATASET": "/data/mnist"}) == {
        "MY_DATASET": "/data/mnist"
    }


def test_given_ordinary_variables_then_they_are_kept_with_their_values():
    env = {"OMP_NUM_THREADS": "4", "HF_HOME": "/data/hf", "CALLABLE": len}

    assert strip_protected(env) == env


def test_given_a_user_who_sets_what_the_plan_sets_then_the_plan_wins():
    user = {
        "XLA_CLIENT_MEM_FRACTION": "0.9",
        "CUDA_DISABLE_CONTROL": "true",
        "WANDB_MODE": "offline",
    }
    plan = {"XLA_CLIENT_MEM_FRACTION": "0.125", "TF_FORCE_GPU_ALLOW_GROWTH": "true"}

    assert merge_environment(user, plan) == {
        "WANDB_MODE": "offline",
        "XLA_CLIENT_MEM_FRACTION": "0.125",
        "TF_FORCE_GPU_ALLOW_GROWTH": "true",
    }


def test_given_a_cpu_profile_then_a_user_cannot_make_gpus_visible_again():
    merged = merge_environment(
        {"NVIDIA_VISIBLE_DEVICES": "all"}, {"NVIDIA_VISIBLE_DEVICES": "void"}
    )

    assert merged == {"NVIDIA_VISIBLE_DEVICES": "void"}
