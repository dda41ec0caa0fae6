"""Launch verl PPO training with a rollalloc strategy: verl's `main_ppo`, with our trainer.

    python -m rollalloc.integrations.verl.main \\
        rollalloc.strategy=pilot-commit rollalloc.pilot_commit.n_pilot=16 \\
        rollalloc.pilot_commit.n_commit=48 actor_rollout_ref.rollout.n=64 \\
        data.train_files=... actor_rollout_ref.model.path=... <any verl option>

The config is verl's ppo_trainer.yaml with config/rollalloc_trainer.yaml on top (a Hydra overlay:
verl's config search path plus a `rollalloc:` section). verl's legacy TaskRunner builds datasets,
workers and resource pools as usual; the only change is the trainer class it instantiates.
"""

from __future__ import annotations

import inspect
import os

import hydra
import ray

CONFIG_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "config")


def _unwrap(actor_cls):
    """The plain class behind a @ray.remote class (Ray keeps it as __ray_metadata__.modified_class)."""
    meta = getattr(actor_cls, "__ray_metadata__", None)
    return meta.modified_class if meta is not None else actor_cls


def _make_task_runner():
    from verl.trainer import main_ppo_v0

    VerlTaskRunner = _unwrap(main_ppo_v0.TaskRunner)

    @ray.remote
    class RollallocTaskRunner(VerlTaskRunner):
        """verl's TaskRunner, instantiating RollallocRayPPOTrainer instead of RayPPOTrainer."""

        def add_actor_rollout_worker(self, config):
            actor_rollout_cls, group_cls = VerlTaskRunner.add_actor_rollout_worker(self, config)
            from rollalloc.integrations.verl import cpu_platform

            if cpu_platform.selected():  # VERL_PLATFORM=cpu: the worker that joins on gloo alone
                actor_rollout_cls = cpu_platform.actor_rollout_worker_cls()
                for role, cls in list(self.role_worker_mapping.items()):
                    if _unwrap(cls).__name__ == "ActorRolloutRefWorker":
                        self.role_worker_mapping[role] = ray.remote(actor_rollout_cls)
            return actor_rollout_cls, group_cls

        def run(self, config):
            from rollalloc.integrations.verl.trainer import RollallocRayPPOTrainer

            # TaskRunner.run looks RayPPOTrainer up in its globals at call time: point it at ours
            # (inside this Ray actor's process only). Ray wraps actor methods (tracing helper) and
            # ships this class with cloudpickle, which copies verl's TaskRunner (not importable
            # by name: the module attribute is the ActorClass) by value, its functions with a copy
            # of their globals; so the name is set in the globals of the function that really runs
            # (setting verl's module attribute alone left verl's own trainer running).
            inspect.unwrap(VerlTaskRunner.run).__globals__["RayPPOTrainer"] = RollallocRayPPOTrainer
            main_ppo_v0.RayPPOTrainer = RollallocRayPPOTrainer
            return VerlTaskRunner.run(self, config)

    return RollallocTaskRunner


@hydra.main(config_path=CONFIG_DIR, config_name="rollalloc_trainer", version_base=None)
def main(config) -> None:
    run(config)


def run(config) -> None:
    """Validate a composed config and run verl's PPO with RollallocRayPPOTrainer (what `main` does
    after Hydra has composed the config; cpu_run.py calls it with a config it composed)."""
    from verl.trainer.main_ppo import run_ppo
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config
    from verl.utils.device import auto_set_device

    from rollalloc.integrations.verl.config import strategy_options

    if config.trainer.use_v1:
        raise ValueError(
            "rollalloc drives verl's RayPPOTrainer (trainer.use_v1=false); the v1 TransferQueue "
            "trainer is not supported yet (docs/verl.md)"
        )
    strategy_options(config.rollalloc)  # fail here, before Ray starts, on a bad rollalloc section
    auto_set_device(config)
    validate_config(
        config=config,
        use_reference_policy=need_reference_policy(config),
        use_critic=need_critic(config),
    )
    run_ppo(config, task_runner_class=_make_task_runner())


if __name__ == "__main__":
    main()
