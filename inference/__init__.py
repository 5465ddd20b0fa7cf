"""``crowdrank.inference``: a subpackage, imported by that name only."""

if __name__ == "inference":      # imported by its bare name, with the repository root on sys.path
    raise ImportError(
        "import crowdrank.inference, not inference: the repository root is the package crowdrank "
        "(pyproject.toml: package-dir), so a bare 'inference' would load a second copy of every "
        "module (a second registry). Install the checkout (pip install -e .) and import "
        "crowdrank.inference.")
