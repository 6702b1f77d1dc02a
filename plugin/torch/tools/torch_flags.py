"""Print what a C++ extension needs from the installed torch, one item a line:
include dirs (';'-separated), library dirs (';'-separated), the C++11 ABI
flag (0/1). Run by meson.build with the interpreter it builds for."""
import torch
from torch.utils import cpp_extension

print(";".join(cpp_extension.include_paths()))
print(";".join(cpp_extension.library_paths()))
print(int(torch._C._GLIBCXX_USE_CXX11_ABI))
