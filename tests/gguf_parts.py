"""A GGUF file split in parts, as llama.cpp's ``llama-gguf-split --split`` writes one (that tool is not in
llama-cpp-python's wheel): gguf-py's own writer, given every metadata field and tensor of a whole file, writes the
parts with their ``split.*`` fields, the metadata in the first."""

from __future__ import annotations

import math
from pathlib import Path


def split_gguf(source: Path, folder: Path, stem: str, parts: int = 3) -> list[Path]:
    """``source`` written again as ``folder/STEM-0000N-of-0000M.gguf``, its tensors shared out over ``parts`` files;
    the parts, in order."""
    import gguf

    reader = gguf.GGUFReader(source)
    writer = gguf.GGUFWriter(folder / f"{stem}.gguf", arch=reader.fields["general.architecture"].contents(),
                             endianess=reader.endianess, split_max_tensors=math.ceil(len(reader.tensors) / parts))
    for field in reader.fields.values():
        if field.name == gguf.Keys.General.ARCHITECTURE or field.name.startswith("GGUF."):
            continue  # the writer's own, and the reader's view of the header
        kind = field.types[0]
        writer.add_key_value(field.name, field.contents(), kind,
                             sub_type=field.types[-1] if kind == gguf.GGUFValueType.ARRAY else None)
    for tensor in reader.tensors:
        writer.add_tensor_info(tensor.name, tensor.data.shape, tensor.data.dtype, tensor.data.nbytes,
                               tensor.tensor_type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    for tensor in reader.tensors:
        writer.write_tensor_data(tensor.data, tensor_endianess=reader.endianess)
    writer.close()
    return sorted(folder.glob(f"{stem}-*-of-{parts:05d}.gguf"))
