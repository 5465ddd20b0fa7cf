"""``crowdrank.models``: a subpackage, imported by that name only."""

if __name__ == "models":      # imported by its bare name, with the repository root on sys.path
    raise ImportError(
        "import crowdrank.models, not models: the repository root is the package crowdrank "
        "(pyproject.toml: package-dir), so a bare 'models' would load a second copy of every "
        "module (a second registry). Install the checkout (pip install -e .) and import "
        "crowdrank.models.")
