"""``python -m crowdrank``: the ``crowdrank`` command (``[project.scripts]`` in
pyproject.toml names the same entry point, :func:`crowdrank.reports.cli.main`)."""

import sys

from crowdrank.reports.cli import main

if __name__ == "__main__":
    sys.exit(main())
