"""``crowdrank.reports``: a subpackage, imported by that name only."""

if __name__ == "reports":      # imported by its bare name, with the repository root on sys.path
    raise ImportError(
        "import crowdrank.reports, not reports: the repository root is the package crowdrank "
        "(pyproject.toml: package-dir), so a bare 'reports' would load a second copy of every "
        "module (a second registry). Install the checkout (pip install -e .) and import "
        "crowdrank.reports.")
