"""`gridxfer campaign` commands (placeholder: being built)."""
import click


@click.group(name="campaign")
def group() -> None:
    """Not built yet."""
