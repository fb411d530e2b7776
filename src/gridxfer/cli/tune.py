"""`gridxfer tune` commands (placeholder: being built)."""
import click


@click.group(name="tune")
def group() -> None:
    """Not built yet."""
