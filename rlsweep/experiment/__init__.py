"""An experiment directory and what it records: what it holds (`experiment_dir`), its trials'
history of restarts and failures (`history`), interrupts and time limits (`interrupt`), and
the recovery of trials after a restart (`recovery`). Below both the trials and the results,
which read and write it.
"""
