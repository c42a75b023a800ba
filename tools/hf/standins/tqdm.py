"""tqdm (stand-in) — the progress bar gguf-py's GGUFWriter.write_tensors_to_file(progress=True) opens while
llama.cpp's converter writes tensors; this one counts silently (Debian's python3-tqdm is not required)."""


class tqdm:
    def __init__(self, *args, total=None, **kwargs):
        del args, kwargs
        self.total, self.n = total, 0

    def update(self, n=1):
        self.n += n

    def set_description(self, *args, **kwargs):
        del args, kwargs

    def close(self):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *args):
        self.close()
