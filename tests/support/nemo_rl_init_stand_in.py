"""Stands in for NeMo-RL in the job tests: attaches to the cluster the way nemo_rl's init_ray does,
passing the whole environment as ray.init's runtime env, then runs one task."""

import os

import ray

ray.init(address="auto", runtime_env={"env_vars": dict(os.environ)}, include_dashboard=False)


@ray.remote(num_cpus=1)
def hf_home() -> str:
    return os.environ.get("HF_HOME", "")


print(f"worker HF_HOME={ray.get(hf_home.remote())}", flush=True)
