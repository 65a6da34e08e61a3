"""Where the datasets live: an explicit folder, else $JAXENC_DATA_DIR."""

from __future__ import annotations

import os
from pathlib import Path

from jaxenc.errors import DataError

DATA_DIR_ENV = "JAXENC_DATA_DIR"


def data_dir(explicit: str | os.PathLike | None = None) -> Path:
    """Returns the dataset root folder; raises DataError naming the fix when there is none."""
    value = explicit if explicit not in (None, "") else os.environ.get(DATA_DIR_ENV)
    if not value:
        raise DataError(
            "no data folder given",
            fix=f"pass --config.data.data_dir=DIR or set {DATA_DIR_ENV}=DIR "
            "(one folder per dataset: sick/, trec/, sst_ptb_trees/, ...; layout: docs/data.md)",
        )
    path = Path(value).expanduser()
    if not path.is_dir():
        raise DataError("data folder does not exist", path=path,
                        fix=f"point --config.data.data_dir or {DATA_DIR_ENV} at an existing folder")
    return path
