"""Where a sweep runs — never part of the spec (Hydra's Sweeper/Launcher split).

- local Ray or an existing cluster: `rlsweep.sweep.run_sweep(address=...)`;
- an autoscaled EC2 cluster: `ec2` writes a Ray cluster-launcher YAML (`ray up` / `ray submit`);
- SageMaker: `sagemaker` builds the training-job request, `sagemaker_entry` is the job's script
  that bootstraps one Ray cluster across the job's hosts and runs the sweep.
"""
