"""The accelerator side of a step: emulated (a fixed time per batch, like MLPerf Storage's DLIO) or
real ResNet-50 training with torch/torchvision when they are present."""

from __future__ import annotations

import time

import numpy as np

# MLPerf Storage presets (ResNet-50): batch size, seconds per batch.
PRESETS = {"v100": (64, 0.195), "a100": (400, 0.435), "h100": (400, 0.224)}


class EmulatedCompute:
    """Sleeps for the accelerator's step time: the CPU stays free for the pipeline, as on a GPU host."""

    def __init__(self, seconds_per_batch: float, batch_size: int, accelerators: int = 1):
        self.seconds_per_batch = seconds_per_batch
        self.batch_size = batch_size          # the whole host's: one batch per accelerator
        self.accelerators = accelerators
        self.device = "emulated"

    def step(self, images: np.ndarray, labels: np.ndarray) -> float:
        # A partial last batch costs its share of a full step.
        seconds = self.seconds_per_batch * len(images) / self.batch_size
        end = time.perf_counter() + seconds
        while True:
            remaining = end - time.perf_counter()
            if remaining <= 0:
                return seconds
            time.sleep(remaining if remaining > 0.002 else 0)


class TorchResNet50:
    """Real training: ResNet-50 (torchvision), SGD, mixed precision on a GPU if there is one."""

    def __init__(self, num_classes: int, batch_size: int, seed: int = 0):
        try:
            import torch
            import torchvision
        except ImportError:
            raise RuntimeError("model=resnet50 needs torch and torchvision (the SageMaker PyTorch container has "
                               "them); use an emulated compute preset where they are absent") from None
        torch.manual_seed(seed)
        self.torch = torch
        self.device = "cuda" if torch.cuda.is_available() else "cpu"
        self.model = torchvision.models.resnet50(num_classes=max(num_classes, 1)).to(self.device)
        self.model = self.model.to(memory_format=torch.channels_last)
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.1 * batch_size / 256, momentum=0.9, weight_decay=1e-4)
        self.loss = torch.nn.CrossEntropyLoss()
        self.mean = torch.tensor([0.485, 0.456, 0.406], device=self.device).view(1, 3, 1, 1) * 255
        self.std = torch.tensor([0.229, 0.224, 0.225], device=self.device).view(1, 3, 1, 1) * 255
        self.batch_size = batch_size
        self.amp = self.device == "cuda"

    def step(self, images: np.ndarray, labels: np.ndarray) -> float:
        torch = self.torch
        start = time.perf_counter()
        x = torch.from_numpy(images).to(self.device, non_blocking=True).permute(0, 3, 1, 2).float()
        x = ((x - self.mean) / self.std).contiguous(memory_format=torch.channels_last)
        y = torch.from_numpy(np.clip(labels, 0, None)).to(self.device, non_blocking=True)
        with torch.autocast(device_type=self.device, dtype=torch.bfloat16, enabled=self.amp):
            loss = self.loss(self.model(x), y)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()
        if self.device == "cuda":
            torch.cuda.synchronize()
        return time.perf_counter() - start

    def save(self, path) -> None:
        self.torch.save(self.model.state_dict(), path)
