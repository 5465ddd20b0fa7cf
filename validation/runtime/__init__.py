"""Where the validation jobs run: cached, resumable grids of experiments in this process,
a process pool or a Dask cluster (:mod:`~crowdrank.validation.runtime.grid`)."""
