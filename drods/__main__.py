"""``python -m drods …``: the ``drods`` command, where its script is not on the PATH."""

from drods.cli.main import app

app(prog_name="drods")
