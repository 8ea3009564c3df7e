"""The System tab: the machine, the processes, the logs."""
