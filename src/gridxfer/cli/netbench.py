"""`gridxfer netbench` commands (placeholder: being built)."""
import click


@click.group(name="netbench")
def group() -> None:
    """Not built yet."""
