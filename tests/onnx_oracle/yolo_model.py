"""A YOLOv8-style detector in plain torch, laid out as the Ultralytics export
of YOLOv8: Conv-BN-SiLU blocks, C2f (Split, Bottlenecks, Concat), SPPF
(three chained MaxPools), an FPN/PAN neck with nearest Upsample, and the
anchor-free head with DFL (Softmax over 16 bins per box side, then a fixed
1x1 convolution that takes the expectation) decoded against anchors built
from the feature map sizes (torch.arange, so Range ops where the export keeps
them).

Output: [batch, 4 + classes, anchors]: cx, cy, w, h in input pixels, then the
class scores after sigmoid. The 'n' size is width 0.25, depth 0.33.
"""
import math

import torch
from torch import nn


def _scaled(channels, width):
    return max(8, int(math.ceil(channels * width / 8) * 8))


class ConvBnSiLU(nn.Module):
    def __init__(self, c_in, c_out, k=1, s=1):
        super().__init__()
        self.conv = nn.Conv2d(c_in, c_out, k, s, k // 2, bias=False)
        self.bn = nn.BatchNorm2d(c_out, eps=1e-3, momentum=0.03)
        self.act = nn.SiLU()

    def forward(self, x):
        return self.act(self.bn(self.conv(x)))


class Bottleneck(nn.Module):
    def __init__(self, c, shortcut):
        super().__init__()
        self.cv1 = ConvBnSiLU(c, c, 3)
        self.cv2 = ConvBnSiLU(c, c, 3)
        self.add = shortcut

    def forward(self, x):
        y = self.cv2(self.cv1(x))
        return x + y if self.add else y


class C2f(nn.Module):
    def __init__(self, c_in, c_out, n, shortcut):
        super().__init__()
        self.c = c_out // 2
        self.cv1 = ConvBnSiLU(c_in, 2 * self.c, 1)
        self.cv2 = ConvBnSiLU((2 + n) * self.c, c_out, 1)
        self.m = nn.ModuleList(Bottleneck(self.c, shortcut) for _ in range(n))

    def forward(self, x):
        y = list(self.cv1(x).split((self.c, self.c), 1))
        for m in self.m:
            y.append(m(y[-1]))
        return self.cv2(torch.cat(y, 1))


class SPPF(nn.Module):
    def __init__(self, c_in, c_out, k=5):
        super().__init__()
        c_mid = c_in // 2
        self.cv1 = ConvBnSiLU(c_in, c_mid, 1)
        self.cv2 = ConvBnSiLU(c_mid * 4, c_out, 1)
        self.m = nn.MaxPool2d(k, 1, k // 2)

    def forward(self, x):
        x = self.cv1(x)
        y1 = self.m(x)
        y2 = self.m(y1)
        return self.cv2(torch.cat((x, y1, y2, self.m(y2)), 1))


class DFL(nn.Module):
    """Distribution focal loss integral: expected bin index per box side."""

    def __init__(self, bins=16):
        super().__init__()
        self.bins = bins
        self.conv = nn.Conv2d(bins, 1, 1, bias=False).requires_grad_(False)
        self.conv.weight.data[:] = torch.arange(bins, dtype=torch.float).view(1, bins, 1, 1)

    def forward(self, x):
        b, _, a = x.shape
        return self.conv(x.view(b, 4, self.bins, a).transpose(2, 1).softmax(1)).view(b, 4, a)


def make_anchors(feats, strides, offset=0.5):
    points, stride_list = [], []
    for f, stride in zip(feats, strides):
        _, _, h, w = f.shape
        sx = torch.arange(w, dtype=f.dtype) + offset
        sy = torch.arange(h, dtype=f.dtype) + offset
        sy, sx = torch.meshgrid(sy, sx, indexing="ij")
        points.append(torch.stack((sx, sy), -1).view(-1, 2))
        stride_list.append(torch.full((h * w, 1), stride, dtype=f.dtype))
    return torch.cat(points).transpose(0, 1), torch.cat(stride_list).transpose(0, 1)


class Detect(nn.Module):
    strides = (8.0, 16.0, 32.0)

    def __init__(self, nc, channels, reg_max=16):
        super().__init__()
        self.nc = nc
        self.reg_max = reg_max
        self.no = nc + 4 * reg_max
        c2 = max(16, channels[0] // 4, 4 * reg_max)
        c3 = max(channels[0], min(nc, 100))
        self.cv2 = nn.ModuleList(
            nn.Sequential(ConvBnSiLU(c, c2, 3), ConvBnSiLU(c2, c2, 3), nn.Conv2d(c2, 4 * reg_max, 1))
            for c in channels)
        self.cv3 = nn.ModuleList(
            nn.Sequential(ConvBnSiLU(c, c3, 3), ConvBnSiLU(c3, c3, 3), nn.Conv2d(c3, nc, 1))
            for c in channels)
        self.dfl = DFL(reg_max)

    def forward(self, feats):
        feats = [torch.cat((self.cv2[i](f), self.cv3[i](f)), 1) for i, f in enumerate(feats)]
        b = feats[0].shape[0]
        anchors, strides = make_anchors(feats, self.strides)
        x_cat = torch.cat([f.view(b, self.no, -1) for f in feats], 2)
        box, cls = x_cat.split((4 * self.reg_max, self.nc), 1)
        distance = self.dfl(box)
        lt, rb = distance.chunk(2, 1)
        anchor_points = anchors.unsqueeze(0)
        x1y1 = anchor_points - lt
        x2y2 = anchor_points + rb
        dbox = torch.cat(((x1y1 + x2y2) / 2, x2y2 - x1y1), 1) * strides
        return torch.cat((dbox, cls.sigmoid()), 1)


class YoloV8(nn.Module):
    def __init__(self, nc=80, width=0.25, depth=0.33):
        super().__init__()
        ch = [_scaled(c, width) for c in (64, 128, 256, 512, 1024)]
        n = lambda k: max(round(k * depth), 1)  # noqa: E731
        self.b0 = ConvBnSiLU(3, ch[0], 3, 2)
        self.b1 = ConvBnSiLU(ch[0], ch[1], 3, 2)
        self.b2 = C2f(ch[1], ch[1], n(3), True)
        self.b3 = ConvBnSiLU(ch[1], ch[2], 3, 2)
        self.b4 = C2f(ch[2], ch[2], n(6), True)
        self.b5 = ConvBnSiLU(ch[2], ch[3], 3, 2)
        self.b6 = C2f(ch[3], ch[3], n(6), True)
        self.b7 = ConvBnSiLU(ch[3], ch[4], 3, 2)
        self.b8 = C2f(ch[4], ch[4], n(3), True)
        self.b9 = SPPF(ch[4], ch[4], 5)
        self.up = nn.Upsample(scale_factor=2.0, mode="nearest")
        self.h12 = C2f(ch[4] + ch[3], ch[3], n(3), False)
        self.h15 = C2f(ch[3] + ch[2], ch[2], n(3), False)
        self.h16 = ConvBnSiLU(ch[2], ch[2], 3, 2)
        self.h18 = C2f(ch[2] + ch[3], ch[3], n(3), False)
        self.h19 = ConvBnSiLU(ch[3], ch[3], 3, 2)
        self.h21 = C2f(ch[3] + ch[4], ch[4], n(3), False)
        self.detect = Detect(nc, (ch[2], ch[3], ch[4]))

    def forward(self, x):
        x = self.b1(self.b0(x))
        p3 = self.b4(self.b3(self.b2(x)))
        p4 = self.b6(self.b5(p3))
        p5 = self.b9(self.b8(self.b7(p4)))
        h12 = self.h12(torch.cat((self.up(p5), p4), 1))
        h15 = self.h15(torch.cat((self.up(h12), p3), 1))
        h18 = self.h18(torch.cat((self.h16(h15), h12), 1))
        h21 = self.h21(torch.cat((self.h19(h18), p5), 1))
        return self.detect([h15, h18, h21])


def calibrate_class_head(model, images, logit_std=1.0, bias=-4.7):
    """Scales each level's last class convolution so that its logits have
    standard deviation logit_std on the calibration images, around a bias
    well below zero (as Ultralytics initializes it): a random detector then
    scores most anchors low and a few above the usual 0.25 threshold."""
    seen = {}
    hooks = [seq[-1].register_forward_hook(lambda m, i, o, k=k: seen.__setitem__(k, o))
             for k, seq in enumerate(model.detect.cv3)]
    with torch.no_grad():
        model.eval()(images)
        for k, seq in enumerate(model.detect.cv3):
            conv = seq[-1]
            logits = seen[k] - conv.bias.view(1, -1, 1, 1)
            conv.weight.mul_(logit_std / float(logits.std()))
            conv.bias.fill_(bias)
    for h in hooks:
        h.remove()
