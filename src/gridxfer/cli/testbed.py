"""`gridxfer testbed` commands (placeholder: being built)."""
import click


@click.group(name="testbed")
def group() -> None:
    """Not built yet."""
