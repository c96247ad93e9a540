"""Allocates and frees through PyTorch's caching allocator, empties the cache, prints the peak."""
import json, torch
keep = []
for mb in (1, 8, 64, 256, 32):
    keep.append(torch.empty(mb << 20, dtype=torch.uint8, device="cuda"))
del keep[1:3]
torch.cuda.empty_cache()
big = torch.empty(512 << 20, dtype=torch.uint8, device="cuda")
del big, keep
torch.cuda.synchronize()
torch.cuda.empty_cache()
print(json.dumps({"max_reserved": torch.cuda.max_memory_reserved()}), flush=True)
