"""The build step of the tpserve package: ships the repository's protocol schemas (comm/schema/*.capnp)
inside the package, so an installed client reads the very files the C++ code is generated from. Nothing is
generated or copied by hand; run from a source checkout (`pip install ./client/python`)."""
import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

SCHEMA_DIR = Path(__file__).resolve().parents[2] / "comm" / "schema"


class BuildPyWithSchemas(build_py):
    def run(self):
        super().run()
        schemas = sorted(SCHEMA_DIR.glob("*.capnp"))
        if not schemas:
            raise RuntimeError(f"no *.capnp in {SCHEMA_DIR}: build the package from a tpserve checkout")
        target = Path(self.build_lib) / "tpserve" / "schema"
        target.mkdir(parents=True, exist_ok=True)
        for schema in schemas:
            shutil.copy2(schema, target / schema.name)


setup(cmdclass={"build_py": BuildPyWithSchemas})
