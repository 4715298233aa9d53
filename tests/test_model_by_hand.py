"""The model's own records and figures (dslab/core/model/: the estimate, the provisioning, the calibration, the
checkpoint estimate), each expected value worked out by hand in the test, for the mutants the answer's tests let
through (issue 58). The answer's JSON carries each record as its schema (dslab/contracts/answer.schema.json) says:
the digits each figure is rounded to, the keys present only where they apply."""

from __future__ import annotations

from types import SimpleNamespace

from dslab.core.model.estimate import Estimate


def _estimate(**changes) -> Estimate:
    figures = dict(mode="File", downloading=12.34, training=100.06, other=54.14, billable_seconds=166.56,
                   cost_usd={"instance": 1.0, "storage": 0.5, "requests": 0.25, "total": 1.75},
                   assumptions=["one"], bound="I/O", au_percent=87.66, au_percent_per_epoch=[80.04, 95.26])
    return Estimate(**{**figures, **changes})


def test_an_estimates_json_rounds_seconds_and_au_to_a_tenth_and_names_each_figure():
    # Seconds and AU to 0.1: 12.34 -> 12.3, 100.06 -> 100.1, 54.14 -> 54.1, 166.56 -> 166.6, 87.66 -> 87.7, the
    # epochs' 80.04 and 95.26 -> 80.0 and 95.3. Dollars as given (job_cost rounds them). No blocker, volume, range,
    # provisioning, FSx import or Express keys: none applies.
    assert _estimate().to_dict() == {
        "mode": "File", "downloading": 12.3, "training": 100.1, "other": 54.1, "billable_seconds": 166.6,
        "cost_usd": {"instance": 1.0, "storage": 0.5, "requests": 0.25, "total": 1.75}, "bound": "I/O",
        "au_percent": 87.7, "au_percent_per_epoch": [80.0, 95.3], "assumptions": ["one"]}


def test_an_estimates_json_carries_its_blocker_volume_range_provisioning_and_fsx_import_where_they_apply():
    # FSx's import, 765.17 s -> 765.2; the volume as given (GB); the range's and the provisioning's own records.
    estimate = _estimate(mode="FSx", blocker="cannot hold it", volume_gb=950, fsx_provisioning_seconds=765.17,
                         range=SimpleNamespace(to_dict=lambda: {"range": "its own"}),
                         provisioning=SimpleNamespace(to_dict=lambda: {"lab": "its own"}))
    out = estimate.to_dict()
    assert (out["blocker"], out["volume_gb"], out["fsx_provisioning_seconds"]) == ("cannot hold it", 950, 765.2)
    assert out["range"] == {"range": "its own"} and out["provisioning"] == {"lab": "its own"}
    assert "storage" not in out and "source" not in out
    # A volume of 0 GB is still a volume: present. An empty blocker is none.
    assert _estimate(volume_gb=0, blocker="").to_dict()["volume_gb"] == 0
    assert "blocker" not in _estimate(blocker="").to_dict()


def test_an_express_estimates_json_names_its_storage_source_and_staging():
    # Express: its storage and label ("Express " + the mode), staging 12.34 s -> 12.3 and $0.123456 -> 0.1235 (4
    # decimals); staging not yet known reads 0.0 for both.
    out = _estimate(mode="FastFile", storage="express", staging_seconds=12.34, staging_cost_usd=0.123456).to_dict()
    assert (out["storage"], out["source"], out["staging_seconds"], out["staging_cost_usd"]) == \
        ("express", "Express FastFile", 12.3, 0.1235)
    unknown = _estimate(storage="express").to_dict()
    assert (unknown["staging_seconds"], unknown["staging_cost_usd"]) == (0.0, 0.0)


def test_an_estimates_wall_clock_is_one_instances_share_of_its_phases():
    # 12.34 + 100.06 + 54.14 = 166.54 s over every instance: 166.54 s for one, 166.54 / 4 = 41.635 s for four; a count
    # of 0 is read as one instance.
    assert abs(_estimate().wall_seconds - 166.54) < 1e-9
    assert abs(_estimate(instance_count=4).wall_seconds - 41.635) < 1e-9
    assert abs(_estimate(instance_count=0).wall_seconds - 166.54) < 1e-9
    assert _estimate(mode="Pipe", storage="express").source == "Express Pipe"


# ---- estimate_mode, each source on one I/O-bound input, worked by hand ---------------------------------------------
# The input: 10,000 files, 1 GB (100 KB each: small files, one sample each), on one ml.p3.2xlarge (8 vCPUs: 8 readers;
# 2.5 Gbit/s x 125 x 0.8 of payload = 250 MB/s of network; one V100; an EBS volume), at 10,000 samples/s: 1.0 s of
# compute an epoch, so every epoch waits on its source; two epochs. The constants are estimate.Model's (its fitted
# and public figures); the lab is as deployed: FSx Scratch 2 at 1,200 GiB, EFS Bursting.
SHAPE = dict(files=10_000, bytes=10**9)


def _io_bound(mode: str, **changes) -> Estimate:
    from dslab.core.facts.prices import PriceTable
    from dslab.core.model.estimate import estimate_mode
    from dslab.core.shape import DatasetShape
    kwargs = {"rate": 10_000.0, "epochs": 2, "prices": PriceTable(), **changes}
    return estimate_mode(mode, DatasetShape(**SHAPE), **kwargs)


def _close(actual, expected, tolerance=1e-9):
    if isinstance(expected, (list, tuple)):
        assert len(actual) == len(expected), (actual, expected)
        for a, e in zip(actual, expected):
            _close(a, e, tolerance)
        return
    assert abs(actual - expected) <= tolerance * max(1.0, abs(expected)), (actual, expected)


def test_file_copies_every_object_first_and_its_start_up_hides_behind_the_download():
    # Downloading: 15.1 s to start the copy, then 1,000 MB at min(157.8 EBS, 250 network) = 157.8 MB/s = 6.33714 s,
    # plus 10,000 x 7.27 ms = 72.7 s: 15.1 + 79.03714 = 94.13714 s (the bucket's 10,000 GETs at 5,500/s, 1.8 s, do
    # not bind). Each epoch reads the copy at 250 MB/s from EBS: 4.0 s, against 1.0 s of compute: AU 25%, I/O-bound.
    # Training 15.4 + 2 x 4.0 = 23.4 s. Start-up 214.5 s, less the 94.13714 s the download hides: 120.36286 s,
    # above the 54.1 s floor. Billable: 94.13714 + 23.4 + 120.36286 = 237.9 s (start-up + training).
    e = _io_bound("File")
    _close([e.downloading, e.training, e.other, e.billable_seconds], [94.137135614702, 23.4, 120.362864385298, 237.9])
    _close(e.epoch_seconds, [4.0, 4.0])
    _close([e.au_percent, *e.au_percent_per_epoch], [25.0, 25.0, 25.0])
    assert (e.bound, e.volume_gb, e.blocker, e.fsx_provisioning_seconds) == ("I/O", 100, None, None)
    assert e.assumptions == ["File: downloads 1.00 GB in 10,000 objects onto each instance's storage, a 100 GB EBS "
                             "volume (the default), at 158 MB/s plus 7.3 ms per object"]


def test_fastfile_lists_first_then_pays_a_get_per_file_over_its_readers():
    # Downloading: the 15.4 s mount, then 10,000 objects listed at 5,500/s: 1.81818 s; 17.21818 s. Each epoch: 10,000
    # GETs x 44.7 ms over 8 readers = 55.875 s, plus 1,000 MB at min(1,000 streamed, 250 network) = 4.0 s: 59.875 s.
    # Training 15.4 + 119.75 = 135.15 s. Other: 214.4 - 17.21818 = 197.18182 s. Billable 349.55 s. AU 1/59.875.
    e = _io_bound("FastFile")
    _close([e.downloading, e.training, e.other, e.billable_seconds], [17.218181818, 135.15, 197.181818182, 349.55])
    _close(e.epoch_seconds, [59.875, 59.875])
    _close(e.au_percent, 100 / 59.875)
    assert e.assumptions == ["FastFile: lists 5,500 objects/s; each file read is a GET of ~45 ms spread over 8 "
                             "readers; streams up to 1000 MB/s"]


def test_pipe_streams_each_epoch_with_s3s_first_byte_prefetched_eight_deep():
    # Set-up 12.1 s. Each epoch: 10,000 objects x 27.83 ms first byte / 8 prefetched = 34.7875 s, plus 1,000 MB at
    # min(300 Pipe, 250 network) = 4.0 s: 38.7875 s. Training 15.4 + 77.575 = 92.975 s. Other 214.4 - 12.1 = 202.3 s.
    # Billable 12.1 + 92.975 + 202.3 = 307.375 s.
    e = _io_bound("Pipe")
    _close([e.downloading, e.training, e.other, e.billable_seconds], [12.1, 92.975, 202.3, 307.375])
    _close(e.epoch_seconds, [38.7875, 38.7875])
    assert e.assumptions == ["Pipe: streams each epoch from S3 at ~300 MB/s with ~28 ms per object (S3's first "
                             "byte, Mountpoint on EC2), prefetched 8 deep (no measured cell)"]


def test_the_script_lists_the_prefix_in_its_first_epoch_and_gets_64_small_objects_at_a_time():
    # Nothing before the script. It lists 10 pages of 1,000 keys at 121.6 ms: 1.216 s, in the first epoch. Each epoch:
    # 10,000 x 27.83 ms / 64 in flight = 4.3484375 s, plus 1,000 MB at min(64 x 87.5 = 5,600, 250 network) = 4.0 s:
    # 8.3484375 s; the first 9.5644375 s. Training 15.4 + 17.912875 = 33.312875 s. Other: the whole 214.4 s start-up.
    # Billable 247.712875 s. AU: the mean of 100/9.5644375 and 100/8.3484375 = (10.45538 + 11.97829) / 2 = 11.21684%.
    e = _io_bound("Script")
    _close([e.downloading, e.training, e.other, e.billable_seconds], [0.0, 33.312875, 214.4, 247.712875])
    _close(e.epoch_seconds, [9.5644375, 8.3484375])
    _close(e.au_percent, (100 / 9.5644375 + 100 / 8.3484375) / 2)
    assert e.assumptions == [
        "Script: the script lists the prefix (10 pages of 1,000 keys, ~122 ms each, Mountpoint on EC2), then GETs each "
        "object (~28 ms first byte, Mountpoint on EC2) 64 at a time, 250 MB/s at most (87.5 MB/s per connection, AWS's "
        "S3 performance guidelines); no channel: SageMaker's lineage does not record the dataset (the lab tags the job "
        "with its URI and stats)"]


def test_fsx_lazy_loads_its_first_epoch_from_s3_then_reads_its_cache():
    # Scratch 2 at 1,200 GiB: 200 MB/s per TiB x 1,200 / 1,024 = 234.375 MB/s (under 250 of network). First epoch:
    # 10,000 x 10 ms first reads / 8 readers = 12.5 s, plus 1,000 MB at 234.375 = 4.26667 s: 16.76667 s. Then 10,000 x
    # 0.5 ms / 8 = 0.625 s plus 4.26667 s: 4.89167 s. Training 15.4 + 21.65833 = 37.05833 s. Mount 12.1 s; other
    # 219.2 - 12.1 = 207.1 s; billable 256.25833 s. Its import: 10,000 objects at 2,000,000 an hour = 18 s.
    e = _io_bound("FSx")
    _close([e.downloading, e.training, e.other, e.billable_seconds], [12.1, 37.058333333, 207.1, 256.258333333])
    _close(e.epoch_seconds, [16.766666667, 4.891666667])
    _close(e.fsx_provisioning_seconds, 18.0)
    assert e.assumptions == ["FSx: Scratch 2, 1,200 GiB (234 MB/s), 234 MB/s per instance; the first epoch "
                             "lazy-loads from S3; creating the file system indexes 10,000 objects in ~0 min (not "
                             "billed to the job, but FSx bills while it exists)"]


def test_efs_bursting_reads_at_its_baseline_up_to_the_instances_network():
    # Bursting under 1 TiB: 100 MiB/s, reads metered at a third: 300 MiB/s = 314.57 MB/s, under the 500 MiB/s per
    # client; the network's 250 MB/s binds. Each epoch 10,000 x 3 ms / 8 = 3.75 s plus 4.0 s: 7.75 s. Training
    # 15.4 + 15.5 = 30.9 s; other 207.1 s; billable 12.1 + 30.9 + 207.1 = 250.1 s.
    e = _io_bound("EFS")
    _close([e.downloading, e.training, e.other, e.billable_seconds], [12.1, 30.9, 207.1, 250.1])
    _close(e.epoch_seconds, [7.75, 7.75])
    assert e.assumptions == ["EFS: EFS Bursting (Max I/O) in us-east-1, 250 MB/s per instance (reads metered at a "
                             "third of the rate) while burst credits last, ~3 ms per file; the data must be copied "
                             "into EFS first (DataSync, not billed to the job)"]


def test_efs_provisioned_is_held_to_its_per_client_limit_and_says_no_burst_credits():
    # Provisioned 1,000 MiB/s, reads metered at a third: 3,000 MiB/s; on ml.p4d.24xlarge (100 Gbit/s x 125 x 0.8 =
    # 10,000 MB/s), one client reads at most 500 MiB/s = 524.288 MB/s: that binds. 96 readers: 10,000 x 3 ms / 96 =
    # 0.3125 s, plus 1,000 MB / 524.288 = 1.9073486 s: 2.2198486 s an epoch. Compute: 8 A100s at 10,000 samples/s
    # each: 10,000 / 80,000 = 0.125 s.
    e = _io_bound("EFS", instance_type="ml.p4d.24xlarge", efs_provisioned_mibps=1000.0)
    _close(e.epoch_seconds, [2.2198486328125, 2.2198486328125])
    _close(e.au_percent, 100 * 0.125 / 2.2198486328125)
    assert e.assumptions[-1] == ("EFS: EFS Provisioned 1,000 MiB/s in us-east-1, 524 MB/s per instance (reads metered "
                                 "at a third of the rate), ~3 ms per file; the data must be copied into EFS first "
                                 "(DataSync, not billed to the job)")


def test_efs_a_resident_dataset_reads_its_first_epoch_from_infrequent_access():
    # 1 GB in files of 100 KB: under EFS IA's 128 KiB, nothing moves to IA: the same as not resident, less the copy.
    small = _io_bound("EFS", efs_resident=True)
    _close(small.epoch_seconds, [7.75, 7.75])
    assert small.assumptions == ["EFS: EFS Bursting (Max I/O) in us-east-1, 250 MB/s per instance (reads metered at "
                                 "a third of the rate) while burst credits last, ~3 ms per file"]
    # 2 TiB in 200,000 files of ~11 MB, resident: all in IA. On ml.p4d.24xlarge (10,000 MB/s of network, 500 MiB/s
    # per client), Bursting counts only what Standard holds: nothing in the first epoch, so its floor, 100 MiB/s x 3 =
    # 314.5728 MB/s; once read back, 2,048 GiB earn 100 x 2,048 / 1,024 = 200 MiB/s x 3 = 600 MiB/s, held to the
    # client's 524.288 MB/s. Each epoch reads 2,199,023.255552 MB, plus 200,000 x 3 ms / 96 readers = 6.25 s.
    from dslab.core.facts.prices import PriceTable
    from dslab.core.model.estimate import estimate_mode
    from dslab.core.shape import DatasetShape
    tib2 = 2 * 2**40
    large = estimate_mode("EFS", DatasetShape(files=200_000, bytes=tib2), instance_type="ml.p4d.24xlarge",
                          rate=10_000.0, epochs=2, prices=PriceTable(), efs_resident=True)
    _close(large.epoch_seconds, [6.25 + tib2 / 1e6 / 314.5728, 6.25 + tib2 / 1e6 / 524.288])
    ia = PriceTable()["efs_ia_read_per_gb"]
    assert large.assumptions[-1] == (f"EFS: the dataset lives in EFS; unread for 7 days, its files of 128 KiB and more "
                                     f"sit in Infrequent Access: the first epoch reads 2,199.02 GB from IA (${ia:.2f} "
                                     "per GB) at 315 MB/s per instance (Bursting counts only Standard), which brings "
                                     "them back to Standard")
    # The IA read is priced: 2,199.023255552 GB x $0.01 = $21.990233 of storage (none where not resident).
    assert large.cost_usd["storage"] == 21.990233


def test_express_shortens_each_get_by_its_first_byte_over_s3_standards_and_stages_once():
    # Express over Standard: 6.278 ms / 27.83 ms = 0.225584. FastFile's GET: 44.7 ms x 0.225584 = 10.0836 ms;
    # 10,000 x that / 8 = 12.60449 s + 4.0 s = 16.60449 s an epoch. Staging: 10,000 copies x 30 ms / 64 at a time =
    # 4.6875 s, plus 1,000 MB at 1,000 MB/s = 1.0 s: 5.6875 s.
    e = _io_bound("FastFile", storage="express")
    ratio = 0.006278 / 0.02783
    _close(e.epoch_seconds, [10_000 * 0.0447 * ratio / 8 + 4.0] * 2)
    _close(e.staging_seconds, 5.6875)
    assert e.source == "Express FastFile" and e.storage == "express"
    # Pipe on Express takes Express's own first byte: 10,000 x 6.278 ms / 8 = 7.8475 s + 4.0 s.
    _close(_io_bound("Pipe", storage="express").epoch_seconds, [11.8475, 11.8475])
    # File on Express: 7.27 ms per object x 0.225584 = 1.64000 ms: 10,000 of them 16.40003 s + 6.33714 s + 15.1 s.
    _close(_io_bound("File", storage="express").downloading, 15.1 + 1000 / 157.8 + 10_000 * 0.00727 * ratio)


def test_a_cluster_shares_the_sources_and_a_sharded_channel():
    # Four ml.p3.2xlarge: each reads 250 MB and 2,500 files an epoch; compute 10,000 / 4 / 10,000 = 0.25 s.
    # File, sharded (the default for several instances): each copies its 250 MB at 157.8 MB/s (1.58428 s) plus 2,500 x
    # 7.27 ms (18.175 s): 15.1 + 19.75928 = 34.85928 s; its epoch reads 250 MB from EBS at 250 MB/s: 1.0 s. The
    # phases are every instance's: downloading 4 x 34.85928 = 139.43711 s.
    f = _io_bound("File", instance_count=4)
    _close(f.downloading, 4 * (15.1 + 250 / 157.8 + 2_500 * 0.00727))
    _close(f.epoch_seconds, [1.0, 1.0])
    _close(f.au_percent, 25.0)
    # Fully replicated: each copies the whole 1,000 MB and 10,000 objects (79.03714 s), reads its 250 MB share.
    r = _io_bound("File", instance_count=4, sharded=False)
    _close(r.downloading, 4 * 94.137135614702)
    assert r.assumptions[1] == "File: FullyReplicated: every instance gets the whole channel"
    assert f.assumptions[1] == "File: ShardedByS3Key: each instance gets its 1/N of the objects"
    assert f.assumptions[0] == ("4 instance(s) x 1 accelerator(s), each at the compute's rate; every instance reads "
                                "its 1/N share of each epoch; shared sources divide their throughput among the "
                                "instances")
    # FSx's 234.375 MB/s shared by four: 58.59375 MB/s each; 250 MB first read 4.26667 s + 2,500 x 10 ms / 8 = 3.125 s.
    x = _io_bound("FSx", instance_count=4)
    _close(x.epoch_seconds, [3.125 + 250 / 58.59375, 2_500 * 0.0005 / 8 + 250 / 58.59375])
    # Billable: every instance's wall, 4 x (12.1 + training + 207.1).
    _close(x.billable_seconds, 4 * (12.1 + 15.4 + sum(x.epoch_seconds) + 207.1))
    _close(x.wall_seconds, 12.1 + 15.4 + sum(x.epoch_seconds) + 207.1)


def test_an_unknown_mode_or_instance_type_is_said_and_a_tie_between_compute_and_io_is_compute_bound():
    import pytest

    from dslab.core.errors import ConfigError
    with pytest.raises(ConfigError) as refused:
        _io_bound("Tape")
    assert refused.value.field == "--mode" and "unknown mode 'Tape'" in str(refused.value)
    # An instance type the table lacks: 8 vCPUs, 10 Gbit/s (x 125 x 0.8 = 1,000 MB/s), one accelerator, EBS. File's
    # epoch then reads 1,000 MB from EBS at 250 MB/s: 4.0 s against 10,000 / 10,000 = 1.0 s of compute (one
    # accelerator, not two).
    from dslab.core.facts.prices import PriceTable
    priced = PriceTable()
    priced.data["instance_hourly"]["ml.x9.huge"] = 1.0
    e = _io_bound("File", instance_type="ml.x9.huge", prices=priced)
    assert e.assumptions[0] == "ml.x9.huge is not in the instance table: assumed 8 vCPUs, 10 Gbit/s, EBS volume"
    _close([e.au_percent, *e.epoch_seconds], [25.0, 4.0, 4.0])
    # At 2,500 samples/s the compute takes 4.0 s, as long as File's read of the copy: compute-bound, AU 100%.
    tie = _io_bound("File", rate=2_500.0)
    assert (tie.bound, tie.au_percent) == ("compute", 100.0)


def test_express_says_its_first_byte_staging_and_the_copys_storage():
    # 6.278 ms against 27.83 ms; staging 10,000 objects in 10,000 x 0.030 / 64 + 1,000 MB / 1,000 MB/s = 5.6875 s,
    # said in seconds (under two minutes: "~0 min" said nothing), 64 at a time, 30 ms each, for
    # express_staging_cost's dollars; the copy's storage: 1 GB x the GB-month price.
    from dslab.core.facts.prices import PriceTable, express_staging_cost
    e = _io_bound("FastFile", storage="express")
    prices = PriceTable()
    cost = express_staging_cost(prices, 10_000, 10**9)
    assert e.assumptions[-1] == (f"S3 Express One Zone: ~6.3 ms first-byte latency instead of ~28 ms (Mountpoint on "
                                 f"EC2; AWS: single-digit ms; no measured cell); staging copies 10,000 objects once in "
                                 f"~6 s (64 copies at a time, ~30 ms each: assumption) for ${cost:.2f}; storage "
                                 f"${prices['express_gb_month']:.2f} per month while the copy is kept")
    _close(e.staging_cost_usd, cost)


def test_every_mode_and_with_express_the_s3_modes_again_on_the_directory_bucket():
    from dslab.core.facts.prices import PriceTable
    from dslab.core.model.estimate import estimate_all
    from dslab.core.shape import DatasetShape
    shape = DatasetShape(**SHAPE)
    plain = estimate_all(shape, rate=10_000.0, prices=PriceTable())
    assert [(e.mode, e.storage) for e in plain] == [(m, "standard") for m in
                                                   ("File", "FastFile", "Pipe", "FSx", "EFS", "Script")]
    both = estimate_all(shape, express=True, rate=10_000.0, prices=PriceTable())
    assert [(e.mode, e.storage) for e in both] == [(e.mode, "standard") for e in plain] + \
        [(m, "express") for m in ("File", "FastFile", "Pipe", "Script")]


def test_the_break_even_says_which_is_cheaper_first_and_where_that_changes():
    from dslab.core.model.estimate import BreakEven
    crossing = BreakEven([1, 2, 3], [1.004, 2.00049, 3.0], [1.50004, 2.0, 2.5], 3, "FSx", ["a"])
    assert crossing.to_dict() == {"epochs": [1, 2, 3], "fsx_usd": [1.004, 2.0005, 3.0], "express_usd": [1.5, 2.0, 2.5],
                                  "crossover_epochs": 3, "cheaper_at_start": "FSx", "assumptions": ["a"]}
    assert crossing.sentence() == ("break-even at 3 epochs: below it FSx is cheaper, from it Express FastFile "
                                   "($3.00 FSx vs $2.50 Express at 3 epochs)")
    other = BreakEven([1, 2], [2.0, 2.0], [1.0, 3.0], 2, "Express FastFile", [])
    assert other.sentence() == ("break-even at 2 epochs: below it Express FastFile is cheaper, from it FSx "
                                "($2.00 FSx vs $3.00 Express at 2 epochs)")
    never = BreakEven([1, 2, 3], [1.0, 2.0, 2.5], [3.0, 4.0, 5.0], None, "FSx", [])
    assert never.sentence() == ("FSx is cheaper at every epoch count from 1 to 3 ($1.00 FSx vs $3.00 Express at 1 "
                                "epoch, $2.50 vs $5.00 at 3)")


def test_the_break_even_adds_fsxs_import_hours_and_expresss_staging_and_its_storage_meanwhile():
    # Per epoch count: FSx's job plus its hourly price over the import's seconds; Express FastFile's job plus the
    # staging copy plus the copy's storage while staging (GB-month price x GB x hours / 730).
    from dslab.core.facts.prices import HOURS_PER_MONTH, PriceTable
    from dslab.core.model.estimate import estimate_mode, fsx_express_break_even
    from dslab.core.model.provisioning import as_deployed
    from dslab.core.shape import DatasetShape
    shape, prices = DatasetShape(files=2_000_000, bytes=100 * 10**9), PriceTable()
    even = fsx_express_break_even(shape, max_epochs=2, prices=prices, rate=10_000.0)
    hourly = as_deployed(1200).fsx.hourly(prices)
    for n in (1, 2):
        fsx = estimate_mode("FSx", shape, epochs=n, prices=prices, rate=10_000.0)
        express = estimate_mode("FastFile", shape, epochs=n, prices=prices, rate=10_000.0, storage="express")
        # 2,000,000 objects import in one hour.
        _close(even.fsx_usd[n - 1], fsx.cost_usd["total"] + hourly * 1.0)
        during = prices["express_gb_month"] * 100 * express.staging_seconds / 3600 / HOURS_PER_MONTH
        _close(even.express_usd[n - 1], express.cost_usd["total"] + express.staging_cost_usd + during)
    assert even.epochs == [1, 2]
    assert even.assumptions[0] == (f"FSx: Scratch 2, 1,200 GiB (234 MB/s) at ${hourly:.3f}/h from creation (S3 import "
                                   "of 2,000,000 objects included) to the end of the run, then torn down")


# ---- provisioning: the lab's settings read, refused, written and read back -----------------------------------------

def _lab(**settings):
    from dslab.core.model.provisioning import lab_from_settings
    return lab_from_settings(settings.get, "cdk.json")


def _refused(**settings):
    import pytest

    from dslab.core.errors import ConfigError
    with pytest.raises(ConfigError) as refused:
        _lab(**settings)
    return refused.value


def test_the_lab_read_from_its_settings_names_each_part_as_the_stack_builds_it():
    lab = _lab()   # nothing set: the stacks' defaults
    assert (lab.fsx.deployment_type, lab.fsx.capacity_gib, lab.efs.mode, lab.efs.region, lab.efs.performance,
            lab.fsx_idle_hours, lab.name) == ("SCRATCH_2", 1200, "bursting", "us-east-1", None, 8.0,
                                              "the lab as deployed (cdk.json)")
    # "None", "null" and "" read as not set, as cdk.json's own null does.
    assert _lab(fsxCapacity="None", efsPerformance="None", region="").fsx.capacity_gib == 1200
    assert _lab(efsPerformance="null").efs.performance is None
    # Persistent 2 at 250 MB/s/TiB over 2,400 GiB; EFS Provisioned 700 MiB/s in General Purpose, eu-west-1; the
    # guard off.
    lab = _lab(fsxDeploymentType="persistent_2", fsxThroughputPerTiB="250", fsxCapacity="2400",
               efsThroughput="PROVISIONED", efsProvisionedMibps="700", efsPerformance="generalPurpose",
               region="eu-west-1", fsxIdleHours="0")
    assert (lab.fsx.deployment_type, lab.fsx.mbps_per_tib, lab.fsx.capacity_gib) == ("PERSISTENT_2", 250.0, 2400)
    assert (lab.efs.mode, lab.efs.provisioned_mibps, lab.efs.performance, lab.efs.region, lab.fsx_idle_hours) == \
        ("provisioned", 700.0, "generalPurpose", "eu-west-1", 0.0)
    # A provisioned rate set with another mode is not the mode's: Bursting has none.
    assert _lab(efsThroughput="bursting", efsProvisionedMibps="700").efs.provisioned_mibps is None
    assert _lab(efsThroughput="elastic").efs.performance_mode == "generalPurpose"


def test_a_setting_the_stack_would_refuse_is_refused_naming_its_key():
    e = _refused(fsxCapacity="lots")
    assert (e.field, e.problem) == ("fsxCapacity", "'lots' is not a number (cdk.json)")
    assert _refused(fsxDeploymentType="SCRATCH_1").field == "fsxDeploymentType"
    assert _refused(fsxCapacity="1000").field == "fsxCapacity"
    assert _refused(fsxDeploymentType="PERSISTENT_2", fsxCapacity="2400", fsxThroughputPerTiB="300").field == \
        "fsxThroughputPerTiB"
    e = _refused(efsThroughput="turbo")
    assert (e.field, e.problem, e.allowed) == ("efsThroughput", "'turbo' (cdk.json)", ["bursting", "provisioned",
                                                                                         "elastic"])
    e = _refused(efsThroughput="provisioned")
    assert (e.field, e.problem) == ("efsProvisionedMibps", "efsThroughput=provisioned needs a MiB/s value (cdk.json)")
    e = _refused(efsThroughput="provisioned", efsProvisionedMibps="5000")
    assert (e.field, e.problem) == ("efsProvisionedMibps", "5000 MiB/s: the lab provisions 1 to 3,414 (cdk.json)")
    assert _refused(efsThroughput="provisioned", efsProvisionedMibps="0.5").field == "efsProvisionedMibps"
    _lab(efsThroughput="provisioned", efsProvisionedMibps="3414")   # the limit itself is allowed
    e = _refused(efsPerformance="turbo")
    assert (e.field, e.problem, e.allowed) == ("efsPerformance", "'turbo' is no EFS performance mode the model prices "
                                               "(cdk.json)", ["maxIO", "generalPurpose"])
    e = _refused(efsThroughput="elastic", efsPerformance="maxIO")
    assert (e.field, e.problem, e.allowed) == ("efsPerformance", "maxIO with efsThroughput=elastic: EFS has no such "
                                               "file system (cdk.json)", ["generalPurpose"])
    e = _refused(fsxIdleHours="400")
    assert (e.field, e.problem) == ("fsxIdleHours", "400 hours: the idle guard takes 0 (off) to 336 (cdk.json)")
    assert _refused(fsxIdleHours="-1").field == "fsxIdleHours"
    assert _lab(fsxIdleHours="336").fsx_idle_hours == 336.0


def test_a_lab_written_to_a_record_reads_back_as_the_same_lab():
    from dslab.core.model.provisioning import AS_DEPLOYED, EfsConfig, FsxConfig, Provisioning
    lab = Provisioning(fsx=FsxConfig.persistent2(500, 4800), efs=EfsConfig("provisioned", 640.0, "eu-west-1",
                                                                          "generalPurpose"),
                       name="what size provisions", fsx_idle_hours=2.0)
    record = lab.to_dict()
    assert record == {
        "name": "what size provisions", "fsx": "Persistent 2 500 MB/s/TiB, 4,800 GiB (2,344 MB/s)",
        "efs": "EFS Provisioned 640 MiB/s (General Purpose)", "s3_prefixes": 1, "express_reads_per_second": 200_000.0,
        # 500 x 4,800 / 1,024 = 2,343.75 MB/s -> 2,343.8 at one decimal
        "fsx_config": {"deployment_type": "PERSISTENT_2", "capacity_gib": 4800, "mbps_per_tib": 500.0,
                       "throughput_mbps": 2343.8},
        "efs_config": {"mode": "provisioned", "provisioned_mibps": 640.0, "region": "eu-west-1",
                       "performance": "generalPurpose"},
        "fsx_idle_hours": 2.0}
    back = Provisioning.from_dict(record, AS_DEPLOYED)
    assert (back.fsx, back.efs, back.name, back.fsx_idle_hours) == (lab.fsx, lab.efs, lab.name, 2.0)
    assert back.efs.performance == "generalPurpose"
    # What an older record lacks is the default's; no FSx record at all is the default lab itself.
    sparse = Provisioning.from_dict({"fsx_config": {}, "efs_config": {}}, AS_DEPLOYED)
    assert (sparse.fsx, sparse.efs.mode, sparse.efs.region, sparse.name) == (FsxConfig(), "bursting", "us-east-1",
                                                                             "the lab as deployed")
    assert Provisioning.from_dict({"name": "x"}, AS_DEPLOYED) is AS_DEPLOYED
    assert Provisioning.from_dict(None, AS_DEPLOYED) is AS_DEPLOYED
    # Where the parts were read, and the settings a deploy must repeat, are written where known.
    known = Provisioning(fsx_source="cdk.json", keep_settings=(("fsxCapacity", 2400),), fsx_idle_hours=None).to_dict()
    assert (known["fsx_source"], known["efs_source"], known["keep_settings"]) == ("cdk.json", None,
                                                                                  {"fsxCapacity": 2400})
    assert "fsx_idle_hours" not in known


def test_each_efs_mode_in_a_few_words_and_as_the_settings_that_build_it():
    from dslab.core.model.provisioning import EfsConfig, FsxConfig, deploy_command
    elastic, bursting, provisioned = EfsConfig("elastic"), EfsConfig(), EfsConfig("provisioned", 511.2)
    assert (elastic.short(), bursting.short(), provisioned.short()) == ("EFS Elastic", "EFS Bursting",
                                                                        "EFS Prov. 511 MiB/s")
    assert (elastic.label(), bursting.label(), provisioned.label()) == (
        "EFS Elastic (General Purpose)", "EFS Bursting (Max I/O)", "EFS Provisioned 511 MiB/s")
    # Provisioned's MiB/s rounds up: 511.2 -> 512; none given reads as 1.
    assert elastic.settings() == {"efsPerformance": "generalPurpose", "efsThroughput": "elastic"}
    assert bursting.settings() == {"efsThroughput": "bursting"}
    assert provisioned.settings() == {"efsThroughput": "provisioned", "efsProvisionedMibps": 512}
    assert EfsConfig("provisioned").settings()["efsProvisionedMibps"] == 1
    # FSx holds a dataset with 5% headroom: 1,200 GiB hold 1,142.857 GiB, not 1,143.
    fsx = FsxConfig()
    assert fsx.holds(1142.857 * 2**30) and not fsx.holds(1143 * 2**30)
    assert deploy_command({}) == "make deploy FSX=keep"
    assert deploy_command({"fsxCapacity": 2400, "efsThroughput": "elastic"}, fsx="up") == \
        'make deploy FSX=up CONTEXT="fsxCapacity=2400 efsThroughput=elastic"'
    assert fsx.short() == "Scratch 2 1,200 GiB" and FsxConfig.persistent2(1000, 7200).short() == "P2-1000 7,200 GiB"
    from dslab.core.model.provisioning import AS_DEPLOYED
    bigger = AS_DEPLOYED.with_fsx_capacity(2400)
    assert (bigger.fsx.capacity_gib, bigger.fsx.deployment_type, bigger.efs, bigger.name) == \
        (2400, "SCRATCH_2", AS_DEPLOYED.efs, AS_DEPLOYED.name)


# ---- a calibration file, as `dslab calibrate` writes it and answers read it ----------------------------------------

def _calibration_document(**changes):
    document = {"written_by": "dslab calibrate", "calibration_version": 1,
                "model": {"startup_file": 200.0, "nvme_download_mbps": 1500.0},
                "constants": [
                    # calibrated, with the range the runs support
                    {"name": "startup_file", "status": "calibrated", "calibrated": 200.0, "range": [190.0, 210.0],
                     "per_job": {"job-a": 195.0}},
                    # calibrated by a file written before ranges were: what the jobs asked for and the value
                    {"name": "nvme_download_mbps", "status": "calibrated", "calibrated": 1500.0,
                     "per_job": {"job-b": 1400.0, "job-c": 1700.0}},
                    # kept: neither a range nor a value of the model
                    {"name": "pipe_mbps", "status": "kept"}],
                "out_of_sample": {"your_runs": {"calibrated_without_it": {"under": -0.12, "over": 0.3}}}}
    document.update(changes)
    return document


def _refused_calibration(document):
    import pytest

    from dslab.core.errors import ConfigError
    from dslab.core.model.calibration import in_use_from_document
    with pytest.raises(ConfigError) as refused:
        in_use_from_document(document, "mine.json")
    return refused.value


def test_a_calibration_file_sets_the_models_constants_their_ranges_and_the_error_on_your_runs():
    from dslab.core.model.calibration import in_use_from_document
    from dslab.core.model.estimate import MODEL
    used = in_use_from_document(_calibration_document(), "mine.json")
    assert (used.model.startup_file, used.model.nvme_download_mbps, used.model.pipe_mbps) == (200.0, 1500.0,
                                                                                           MODEL.pipe_mbps)
    # startup_file: its range as written; nvme_download_mbps: from 1,400 (job-b) to 1,700 (job-c), the value within.
    assert used.calibrated == (("startup_file", 190.0, 210.0), ("nvme_download_mbps", 1400.0, 1700.0))
    assert (used.error, used.source) == ((-0.12, 0.3), "mine.json")
    assert in_use_from_document(_calibration_document(out_of_sample={}), "mine.json").error is None


def test_a_calibration_file_changed_by_hand_is_refused_naming_the_field():
    import copy
    assert _refused_calibration({"model": {}}).field == "--calibration"
    e = _refused_calibration(_calibration_document(calibration_version=0))
    assert e.field == "--calibration: calibration_version" and "this dslab reads 1" in e.problem
    e = _refused_calibration(_calibration_document(model=None))
    assert (e.field, e.problem) == ("--calibration: model", "missing: write the file again with `dslab calibrate`")
    e = _refused_calibration(_calibration_document(model={"warp_factor": 9.0}))
    assert (e.field, e.problem) == ("--calibration: model.warp_factor", "not a constant of this dslab's model")
    assert "startup_file" in e.allowed
    e = _refused_calibration(_calibration_document(model={"startup_file": -1.0}))
    assert (e.field, e.problem) == ("--calibration: model.startup_file", "-1.0: every constant is a positive number")
    assert _refused_calibration(_calibration_document(model={"startup_file": True})).field == \
        "--calibration: model.startup_file"
    e = _refused_calibration(_calibration_document(constants=None))
    assert (e.field, e.problem) == ("--calibration: constants", "missing: write the file again with `dslab calibrate`")
    e = _refused_calibration(_calibration_document(constants=["startup_file"]))
    assert (e.field, e.problem) == ("--calibration: constants[0]", "not a constant's record: write the file again")

    def changed(i, **record):
        document = _calibration_document()
        constants = copy.deepcopy(document["constants"])
        constants[i].update(record)
        document["constants"] = constants
        return _refused_calibration(document)
    e = changed(2, calibrated="fast")
    assert (e.field, e.problem) == ("--calibration: constants[2].calibrated", "'fast' for pipe_mbps: a constant's "
                                    "value is a positive number; set it back, or write the file again with `dslab "
                                    "calibrate`")
    e = changed(0, calibrated=201.0)
    assert (e.field, e.problem) == ("--calibration: constants[0].calibrated", "201.0 for startup_file, where "
                                    "model.startup_file is 200.0: they are one value; set both, or write the file "
                                    "again")
    e = changed(1, per_job={"job-b": 0})
    assert (e.field, e.problem) == ("--calibration: constants[1].per_job", "each job's value is a positive number: "
                                    "write the file again")
    for bad in ([190.0], [190.0, 210.0, 220.0], [205.0, 210.0], [190.0, 199.0], [-1.0, 210.0], "190-210"):
        e = changed(0, range=bad)
        assert (e.field, e.problem) == ("--calibration: constants[0].range", f"{bad!r} for startup_file: two positive "
                                        "numbers, low to high, around its value 200.0; set it back, or write the file "
                                        "again")
    for under, over in ((0.1, 0.3), (-1.0, 0.3), (-0.1, -0.01), (None, 0.3), (-0.1, None)):
        e = _refused_calibration(_calibration_document(out_of_sample={"your_runs": {"calibrated_without_it": {
            "under": under, "over": over}}}))
        assert (e.field, e.problem) == ("--calibration: out_of_sample.your_runs.calibrated_without_it",
                                        "under (-1 to 0) and over (0 or more) are the error on your runs: write the "
                                        "file again")
    # The range's ends may be the value itself.
    from dslab.core.model.calibration import in_use_from_document
    document = _calibration_document()
    document["constants"][0]["range"] = [200.0, 200.0]
    assert in_use_from_document(document, "x").calibrated[0] == ("startup_file", 200.0, 200.0)


# ---- the checkpoint sync, worked by hand ---------------------------------------------------------------------------
# One ml.p3.2xlarge (no NVMe: its default 100 GB gp2 volume writes 128 MiB/s = 134.217728 MB/s; 2.5 Gbit/s x 1,000 / 8
# x 0.8 = 250 MB/s of network; $3.825 an hour) saving a checkpoint of two files, 2 GB and 1 GB, every 10 minutes (144
# saves a day), keeping 2. Parts of 8 MiB: ceil(2e9 / 8,388,608) = 239 and ceil(1e9 / 8,388,608) = 120: 359.

def _sync_question(every_seconds: float = 600.0, **changes):
    from dslab.core.facts.prices import PriceTable
    from dslab.core.model import checkpoint_estimate as ce
    from dslab.core.model.provisioning import AS_DEPLOYED
    rank = SimpleNamespace(files=[("model.pt", 2 * 10**9), ("optimizer.pt", 10**9)])
    plan = SimpleNamespace(hosts=1, scale=1.0, host_ranks=lambda host: [rank])
    return ce.Question(**{"plan": plan, "instance_type": "ml.p3.2xlarge", "every_seconds": every_seconds, "keep": 2,
                          "prices": PriceTable(), "lab": AS_DEPLOYED, **changes})


def test_the_s3_syncs_save_restore_and_day_worked_by_hand():
    from dslab.core.model import checkpoint_estimate as ce
    q = _sync_question()
    load = q.load
    assert (load.total_bytes, load.host_bytes, load.parts, load.host_parts, load.files) == (3 * 10**9, 3 * 10**9, 359,
                                                                                            359, 2)
    e = ce.estimate_target(q, "s3")
    gp2 = 128 * 1.048576
    # The stall: 3,000 MB onto the volume at 134.217728 MB/s = 22.351741 s. The upload behind it: 3,000 MB at
    # min(250 network, 10 x 87.5) = 250 MB/s: 12.0 s (359 PUTs at 3,500 a second: 0.10 s, not the bound).
    _close([e.stall_seconds, e.upload_seconds, e.save_seconds], [3000 / gp2, 12.0, 3000 / gp2 + 12.0])
    # The restore: both kept checkpoints, 6,000 MB, at min(250, 134.217728) = 44.703484 s, then the script reads its
    # 3,000 MB back: 22.351741 s. 718 GETs.
    _close([e.copy_in_seconds, e.restore_seconds], [6000 / gp2, 9000 / gp2])
    assert (e.puts_per_save, e.gets_per_restore) == (359, 718)
    # A day: 144 saves. Storage: 6 GB kept plus what the sync deleted, a noncurrent version 1.5 days on average: 3 GB x
    # 144 x 1.5 = 648 GB; (6 + 648) x $0.023 a GB-month x 24 / 730 hours = $0.494532 a day.
    _close(e.storage_usd_per_day, 654 * 0.023 * 24 / 730)
    # Requests: 359 PUTs x $5 a million = $0.001795 a save, x 144 = $0.25848 a day.
    _close(e.requests_usd_per_day, 0.25848)
    # The stall's idle instance: 22.351741 s x $3.825 / 3,600 = $0.023749 a save; the restore: 67.055225 s of it plus
    # 718 GETs x $0.4 a million.
    _close(e.idle_usd_per_save, 3000 / gp2 * 3.825 / 3600)
    _close(e.restore_usd, 9000 / gp2 * 3.825 / 3600 + 718 * 0.4 / 1e6)
    _close(e.usd_per_day, e.idle_usd_per_save * 144 + 654 * 0.023 * 24 / 730 + 0.25848)
    assert e.bound == "the instance's volume (134 MB/s); the upload behind it: 250 MB/s per instance"
    assert e.warnings == [] and e.blocker is None and e.premise == "as deployed"
    assert e.provision == "the lab's data bucket, through each instance's a 100 GB EBS volume (the default)"
    assert e.assumptions == [ce.sync_assumption(), ce.NONCURRENT_SAID]
    record = e.to_dict()
    assert (record["save_seconds"], record["stall_seconds"], record["restore_seconds"], record["upload_seconds"],
            record["copy_in_seconds"]) == (34.35, 22.35, 67.06, 12.0, 44.7)
    assert (record["storage_usd_per_day"], record["requests_usd_per_day"], record["idle_usd_per_save"],
            record["restore_usd"], record["saves_per_day"]) == (0.49, 0.2585, 0.0237, 0.0715, 144.0)


def test_a_sync_whose_upload_outlasts_the_interval_falls_behind_and_a_volume_too_small_blocks_it():
    from dslab.core.model import checkpoint_estimate as ce
    # Every 10 s: the 12 s upload falls behind.
    e = ce.estimate_target(_sync_question(every_seconds=10.0), "s3")
    assert e.warnings == ["its upload takes 12 s, longer than the 10 s between saves: the uploads fall behind"]
    assert not e.keeps_up
    # Keeping 40: 120 GB at a restore, more than a 100 GB volume asked for.
    blocked = ce.estimate_target(_sync_question(keep=40, volume_size_gb=100), "s3")
    assert blocked.blocker.startswith("each instance holds ")
    assert blocked.blocker.endswith("fewer kept (--keep), a smaller --scale, a larger --volume-size-gb")


def test_the_express_sync_pays_its_uploads_and_retrievals_by_the_gb_and_keeps_no_noncurrent_version():
    from dslab.core.model import checkpoint_estimate as ce
    q = _sync_question()
    prices = q.prices
    e = ce.estimate_target(q, "express")
    # Storage: the 6 GB kept only, at Express's GB-month price, a day's share.
    _close(e.storage_usd_per_day, 6 * prices["express_gb_month"] * 24 / 730)
    # A save: 359 PUTs at Express's price a thousand plus 3 GB uploaded at its price per GB.
    per_save = 359 * prices["express_put_per_thousand"] / 1000 + 3 * prices["express_upload_per_gb"]
    _close(e.requests_usd_per_day, per_save * 144)
    # The restore's requests: 718 GETs, and 6 GB retrieved.
    restore_requests = 718 * prices["express_get_per_thousand"] / 1000 + 6 * prices["express_retrieval_per_gb"]
    _close(e.restore_usd, 9000 / (128 * 1.048576) * 3.825 / 3600 + restore_requests)
    assert ce.NONCURRENT_SAID not in e.assumptions
    assert e.provision.startswith("the lab's S3 Express One Zone directory bucket, through")


def test_a_checkpoint_duration_reads_its_unit_and_refuses_what_is_not_one():
    import pytest

    from dslab.core.errors import ConfigError
    from dslab.core.model.checkpoint_estimate import default_keep, parse_duration
    assert [parse_duration(t, "--every") for t in ("30m", "2h", "90s", "1.5h", "5 min", "45sec", "20", "3M")] == \
        [1800.0, 7200.0, 90.0, 5400.0, 300.0, 45.0, 1200.0, 180.0]
    assert parse_duration("20", "--save-under", unit="s") == 20.0
    for bad in ("soon", "0s", "8d", "m", "-5m", "nan"):
        with pytest.raises(ConfigError) as refused:
            parse_duration(bad, "--every")
        assert refused.value.field == "--every" and refused.value.problem == f"{bad!r} is not a duration"
    assert parse_duration("168h", "--every") == 7 * 86_400   # seven days, the longest
    # What the workload writes is kept, up to 100; 2 where it writes none (or says nothing).
    assert [default_keep(SimpleNamespace(writes=w)) for w in (1, 5, 250, 0, None)] == [1, 5, 100, 2, 2]
    assert default_keep(object()) == 2


def test_fsx_as_a_checkpoint_target_writes_at_the_lower_of_its_network_and_disk_and_bills_its_whole_day():
    from dslab.core.model import checkpoint_estimate as ce
    from dslab.core.model.provisioning import FsxConfig
    q = _sync_question()
    e = ce.estimate_target(q, "fsx")
    # Scratch 2 at 1,200 GiB = 1.171875 TiB: writes min(200 network, 100 disk) x 1.171875 = 117.1875 MB/s, reads
    # min(200, 200) x 1.171875 = 234.375 MB/s. A save: 3,000 MB at 117.1875 = 25.6 s (the instance's 250 MB/s would
    # take 12 s); a restore 3,000 / 234.375 = 12.8 s. Its day: 1,200 GiB x $0.14 / 730 x 24 = $5.523288.
    _close([e.save_seconds, e.stall_seconds, e.restore_seconds], [25.6, 25.6, 12.8])
    _close(e.standing_usd_per_day, 1200 * 0.14 / 730 * 24)
    _close([e.idle_usd_per_save, e.restore_usd], [25.6 * 3.825 / 3600, 12.8 * 3.825 / 3600])
    assert (e.storage_usd_per_day, e.requests_usd_per_day, e.quota, e.premise) == (0.0, 0.0, None, "as deployed")
    assert e.provision == "Scratch 2, 1,200 GiB (writes 117 MB/s, reads 234 MB/s uncached)"
    assert e.bound == "FSx's write throughput (117 MB/s: the lower of its network and disk per TiB)"
    assert e.assumptions == ["FSx bills its capacity whether used or not: its whole day is priced"]
    # Every 20 s, the 25.6 s save falls behind.
    assert ce.estimate_target(_sync_question(every_seconds=20.0), "fsx").warnings == \
        ["a save takes 26 s, longer than the 20 s between saves"]
    # 500 kept: 3 GB x 500 x 1.05 headroom = 1,466.9 GiB, more than 1,200.
    blocked = ce.estimate_target(_sync_question(keep=500), "fsx")
    assert "need 1,467 GiB, more than FSx's 1,200 GiB (as deployed): deploy it larger" in blocked.blocker
    # Persistent 2 at 1,000 MB/s/TiB over 120,000 GiB writes 1,000 x 117.1875 TiB = 117,188 MB/s: the instance's
    # 250 MB/s network bounds it; the size needs the account's FSx quota raised past its 100,800 GiB default.
    big = ce._fsx(q, FsxConfig.persistent2(1000, 120_000), "provisioned for the question", {"fsxCapacity": 120_000})
    assert big.bound == "the instances' network (250 MB/s)"
    _close(big.save_seconds, 12.0)
    assert big.quota["needed_gib"] == 120_000 and big.settings == {"fsxCapacity": 120_000}


def test_efs_as_a_checkpoint_target_in_each_throughput_mode():
    from dslab.core.model import checkpoint_estimate as ce
    from dslab.core.model.provisioning import EfsConfig
    mib = 1.048576
    # Bursting, saved once a day: 6 GB kept = 5.59 GiB stored, whose baseline (50 MiB/s per TiB: 0.27 MiB/s) earns
    # 23,574 MiB a day against 2,861 MiB written: it writes at its burst rate, 100 MiB/s = 104.8576 MB/s: 3,000 MB in
    # 28.610229 s (the client's min(524.288, 250 network) = 250 would take 12 s). Reads metered at a third: 300 MiB/s,
    # 9.54 s, under the client's 12 s. Storage: 6 GB x $0.30 a GB-month, a day's share.
    daily = _sync_question(every_seconds=86_400.0)
    e = ce.estimate_target(daily, "efs")
    _close([e.save_seconds, e.restore_seconds], [3000 / (100 * mib), 12.0])
    assert e.bound == "EFS: Bursting's burst rate (100 MiB/s, while credits last)"
    _close(e.storage_usd_per_day, 6 * 0.3 * 24 / 730)
    assert (e.standing_usd_per_day, e.requests_usd_per_day) == (0.0, 0.0)
    assert e.assumptions[1] == ("checkpoints are rewritten every interval, so they stay in EFS Standard (never "
                                "Infrequent Access)")
    # Every 10 minutes: 411,987 MiB written a day, past what the baseline earns: it writes at its baseline,
    # 50 x 5.587935 / 1,024 = 0.272848 MiB/s; a save takes 3,000 / (0.272848 x 1.048576) = 10,486 s: it falls behind.
    slow = ce.estimate_target(_sync_question(), "efs")
    baseline = 50 * (6e9 / 2**30) / 1024
    _close(slow.save_seconds, 3000 / (baseline * mib))
    assert slow.bound == ("EFS: Bursting's baseline (0.3 MiB/s for 6 GiB stored): a day's writes spend more burst "
                          "credits than the baseline earns")
    assert slow.warnings == ["a save takes 10,486 s, longer than the 600 s between saves"]
    # Elastic: 5 GiB/s of writes, the client's 250 MB/s binds (12 s each way). Each save writes 3 GB at $0.06, 144 a
    # day: $25.92; a restore reads 3 GB at $0.03.
    elastic = ce._efs(_sync_question(), EfsConfig("elastic"), "provisioned for the question")
    _close([elastic.save_seconds, elastic.restore_seconds], [12.0, 12.0])
    assert elastic.bound == "EFS's per-client limit (1,500 MiB/s per instance)"
    _close(elastic.requests_usd_per_day, 3 * 0.06 * 144)
    _close(elastic.restore_usd, 12.0 * 3.825 / 3600 + 3 * 0.03)
    # Provisioned 200 MiB/s: writes at 209.7152 MB/s, 14.305115 s; reads 600 MiB/s (12 s by the client); it stands
    # at 200 x $6 a MiB/s-month, a day's share: $39.452055.
    provisioned = ce._efs(_sync_question(), EfsConfig("provisioned", 200.0), "provisioned for the question")
    _close([provisioned.save_seconds, provisioned.restore_seconds], [3000 / (200 * mib), 12.0])
    _close(provisioned.standing_usd_per_day, 200 * 6.0 * 24 / 730)
    assert provisioned.bound == "EFS: its Provisioned 200 MiB/s (writes metered at the full rate)"


# ---- the fit on Bencher's cells, by hand (dslab/contracts/bencher-cells.csv) ---------------------------------------

def _fit_without(*scenarios: str):
    from dslab.core.model.calibration import fit, measured_cells
    return fit([c for c in measured_cells() if c.scenario not in scenarios])


def test_the_fit_on_every_cell_names_the_cells_each_constant_rests_on():
    fitted = _fit_without()
    # FSx's mount: the four FSx cells' Downloading, (10.4 + 13.7 + 12.1 + 12.1) / 4 = 12.075 s.
    mount = fitted["mount_fixed"]
    assert mount.cells == ("A FSx", "B FSx", "C FSx", "D FSx") and mount.cross_validated
    _close(mount.value, 12.075)
    # File's start-up rests on one cell, B (22.1 + 192.4 = 214.5 s), with its repeats' range, +-12.0 s.
    start = fitted["startup_file"]
    assert (start.cells, start.why) == (("B File",), "rests on one cell (B File): its repeats' range")
    _close([start.value, start.low, start.high], [214.5, 202.5, 226.5])
    # File's per-object copy rests on two cells (A and C): cross-validated, so no range and no words of one cell.
    per_object = fitted["file_per_object"]
    assert (per_object.cells, per_object.low, per_object.high, per_object.why) == (("A File", "C File"), None, None, "")
    # A ranged constant reads in its unit: under 1 in ms, a rate in MB/s, else seconds.
    assert start.as_assumption().unit == "s" and fitted["ebs_download_mbps"].as_assumption().unit == "MB/s"
    assert per_object.as_assumption() is None and mount.as_assumption() is None


def test_a_fold_without_b_takes_files_start_up_from_fastfiles_and_fsxs():
    # Without B no File cell has a short download. FastFile's start-up: A's 18.8 + 212.3 = 231.1 and D's 17.1 + 192.8
    # = 209.9, mean 220.5; FSx's: A's 10.4 + 215.8 = 226.2 and D's 12.1 + 210.0 = 222.1, mean 224.15. File's is their
    # mean, 222.325 s, ranged over every short-download cell with few files: 209.9 (D FastFile) to 231.1 (A FastFile)
    # -- C's FSx cell downloads quickly too, but reads 1.53 M files, and D's File cell has few files but a long
    # download: neither is in.
    start = _fit_without("B")["startup_file"]
    _close([start.value, start.low, start.high], [222.325, 209.9, 231.1])
    assert start.cells == () and start.why.startswith("no File cell left: FastFile's and FSx's start-ups")


def test_a_fold_without_d_takes_ebs_from_the_prior_and_files_copy_start_from_b():
    # Without D no File cell reads large shards: EBS's rate is the prior (SageMaker's 50 GB in about 5 minutes), and
    # the copy's start rests on B alone: its Downloading less 1,100 MB at that rate, with B's repeats' range.
    from dslab.core.model.calibration import EBS_PRIOR_MBPS
    fitted = _fit_without("D")
    ebs, fixed = fitted["ebs_download_mbps"], fitted["file_download_fixed"]
    assert (ebs.value, ebs.low, ebs.high, ebs.cells) == (*EBS_PRIOR_MBPS, ())
    _close(fixed.value, 22.1 - 1100 / EBS_PRIOR_MBPS[0])
    assert (fixed.cells, fixed.why) == (("B File",), "rests on one cell (B File): its repeats' range")


# ---- a range's arithmetic and its words (calibration.py) -----------------------------------------------------------

def test_a_range_widens_the_fast_and_slow_ends_by_the_error_and_the_spread_in_quadrature():
    from dslab.core.model.calibration import Error
    # Under -20% (the model predicts 20% low: a run may measure 1 / 0.8 - 1 = 25% above), over +25% (it may measure
    # 1 - 1 / 1.25 = 20% below), repeats +-5%: low = 100 x (1 - hypot(0.20, 0.05)) = 100 x (1 - 0.206155) = 79.3845;
    # high = 200 x (1 + hypot(0.25, 0.05)) = 200 x 1.254951 = 250.9902.
    low, high = Error(-0.2, 0.25, 0.05, ("A", "B")).widen(100.0, 200.0)
    _close([low, high], [100 * (1 - (0.2**2 + 0.05**2) ** 0.5), 200 * (1 + (0.25**2 + 0.05**2) ** 0.5)])
    assert Error(-0.2, 0.25, 0.05, ("A", "B")).describe() == (
        "out-of-sample error -20.0% to +25.0% (each of 2 scenarios predicted from the others), repeats ±5.0%")
    # No error, no spread: the ends themselves.
    assert Error(0.0, 0.0, 0.0, ()).widen(100.0, 200.0) == (100.0, 200.0)


def test_a_range_says_its_basis_and_what_moves_it_and_records_its_figures():
    from dslab.core.model.calibration import Assumption, Error, Range
    error = Error(-0.12345, 0.23456, 0.03456, ("A", "B", "C"))
    pipe = Assumption("pipe_mbps", "Pipe throughput", 150.0, 1350.0, "an assumption", "MB/s")
    r = Range(100.04, 300.06, 1.234567, 3.456789, False, error, [(pipe, 300.0, 0.256)])
    assert r.to_dict() == {"billable_seconds": [100.0, 300.1], "job_usd": [1.2346, 3.4568], "basis": "assumptions",
                           "out_of_sample_error": [-0.1235, 0.2346], "repeats_spread": 0.0346,
                           "evidence": [r.basis(), "Pipe throughput 300 MB/s (150-1,350 MB/s: an assumption): +26% at "
                                                   "its slow end"]}
    assert r.basis() == ("no measured cell: the measured sources' out-of-sample error -12.3% to +23.5% (each of 3 "
                         "scenarios predicted from the others), repeats ±3.5%, and what it assumes")
    assert r.summary() == ("no measured cell: the model's -12.3% to +23.5%, repeats ±3.5%; at its slow end: Pipe "
                           "throughput +26%")
    measured = Range(1.0, 2.0, 0.1, 0.2, True, error, [])
    assert measured.to_dict()["basis"] == "measured cells"
    assert measured.summary() == "measured cells: out-of-sample -12.3% to +23.5%, repeats ±3.5%"
    assert measured.basis().startswith("measured cells (Bencher, ml.p3.2xlarge, one epoch): out-of-sample error")


def test_an_assumption_reads_its_value_and_range_in_its_unit():
    from dslab.core.model.calibration import Assumption
    latency = Assumption("fsx_read_latency", "FSx cached read", 0.0001, 0.001, "AWS", "ms", 1000)
    # 0.5 ms: under 1 in the unit, two significant digits; 0.1 and 1.0 ms likewise: "0.1" and "1.0".
    assert latency.describe(0.0005) == "FSx cached read 0.5 ms (0.1-1.0 ms: AWS)"
    share = Assumption("network_payload", "network share carrying data", 0.7, 0.9, "an assumption")
    assert share.describe(0.8) == "network share carrying data 0.8 (0.7-0.9: an assumption)"
    rate = Assumption("fastfile_list_rate", "FastFile listing", 5500.0, 12345.0, "the post", "objects/s")
    assert rate.describe(5500.0) == "FastFile listing 5,500 objects/s (5,500-12,345 objects/s: the post)"
    assert Assumption("x", "a time", 1.0, 99.0, "s").describe(12.34) == "a time 12.3 (1.0-99.0: s)"


def test_a_calibrations_own_ranges_and_error_replace_the_shipped_where_it_calibrated():
    from dslab.core.model.calibration import SHIPPED, Assumption, Error, InUse
    shipped = {"pipe_mbps": Assumption("pipe_mbps", "Pipe throughput", 150.0, 1350.0, "an assumption", "MB/s"),
               "efs_read_latency": Assumption("efs_read_latency", "EFS", 0.001, 0.01, "AWS", "ms", 1000)}
    mine = InUse(source="mine.json", calibrated=(("pipe_mbps", 280.0, 320.0), ("not_ranged", 1.0, 2.0)),
                 error=(-0.3, 0.1))
    ranges = mine.ranges(shipped)
    assert (ranges["pipe_mbps"].low, ranges["pipe_mbps"].high, ranges["pipe_mbps"].source) == (280.0, 320.0,
                                                                                             "your runs (mine.json)")
    assert ranges["efs_read_latency"] == shipped["efs_read_latency"] and "not_ranged" not in ranges
    # The error on your runs widens the model's where it is wider, each side on its own; the spread stays.
    widened = mine.widen(Error(-0.1, 0.2, 0.05, ("A",)))
    assert (widened.under, widened.over, widened.spread, widened.scenarios) == (-0.3, 0.2, 0.05, ("A",))
    assert SHIPPED.widen(Error(-0.1, 0.2, 0.05, ("A",))) == Error(-0.1, 0.2, 0.05, ("A",))
    assert mine.describe() == "calibration mine.json, fitted on your AWS runs: 2 constants (pipe_mbps, not_ranged)"
    assert InUse(source="one.json", calibrated=(("pipe_mbps", 1.0, 2.0),)).describe() == (
        "calibration one.json, fitted on your AWS runs: 1 constant (pipe_mbps)")
    assert InUse(source="none.json").describe() == "calibration none.json, fitted on your AWS runs: 0 constants"
    assert mine.to_dict() == {"source": "mine.json", "calibrated": ["pipe_mbps", "not_ranged"], "line": mine.describe()}
    assert SHIPPED.to_dict() == {"source": "shipped", "calibrated": [],
                                 "line": "the shipped calibration (Bencher's 12 cells and public figures)"}


def test_a_corner_puts_each_ranged_constant_at_the_end_that_lengthens_or_shortens_the_job():
    from dslab.core.model.calibration import Assumption, _corner, _usd
    from dslab.core.model.estimate import MODEL
    ranges = {"pipe_mbps": Assumption("pipe_mbps", "Pipe", 150.0, 1350.0, ""),          # larger: faster
              "efs_read_latency": Assumption("efs_read_latency", "EFS", 0.001, 0.01, ""),   # larger: slower
              "s3_standard_first_byte": Assumption("s3_standard_first_byte", "S3", 0.02, 0.04, "")}
    slow, fast = _corner(MODEL, ranges, True, "standard"), _corner(MODEL, ranges, False, "standard")
    assert (slow.pipe_mbps, slow.efs_read_latency, slow.s3_standard_first_byte) == (150.0, 0.01, 0.04)
    assert (fast.pipe_mbps, fast.efs_read_latency, fast.s3_standard_first_byte) == (1350.0, 0.001, 0.02)
    # On Express, S3 Standard's first byte sets how much the directory bucket saves (Express / Standard): larger is
    # faster there.
    assert _corner(MODEL, ranges, True, "express").s3_standard_first_byte == 0.02
    assert slow.startup_file == MODEL.startup_file   # a constant without a range keeps its value
    # Dollars at other billable seconds: the time-billed part scales, the requests stay: $10 of which $2 requests
    # over 100 s -> at 150 s, 2 + 8 x 1.5 = $14.
    estimate = SimpleNamespace(cost_usd={"requests": 2.0, "total": 10.0}, billable_seconds=100.0)
    assert _usd(estimate, 150.0) == 14.0
    assert _usd(SimpleNamespace(cost_usd={"total": 10.0}, billable_seconds=0.0), 150.0) == 10.0


def test_fsx_that_cannot_hold_the_dataset_is_a_blocker_naming_the_capacity_it_needs():
    # 2 TiB = 2,048 GiB, with 5% headroom 2,150.4 GiB: more than 1,200; Scratch 2's next step is 2,400 GiB.
    from dslab.core.facts.prices import PriceTable
    from dslab.core.model.estimate import estimate_mode
    from dslab.core.shape import DatasetShape
    e = estimate_mode("FSx", DatasetShape(files=1000, bytes=2 * 2**40), rate=10_000.0, prices=PriceTable())
    assert e.blocker == ("FSx for Lustre (Scratch 2, 1,200 GiB (234 MB/s)) cannot hold 2,048 GiB: it needs 2,400 GiB "
                         "or more")


def test_a_clusters_gets_are_held_to_the_buckets_rate_per_prefix():
    # 8 x ml.p4d.24xlarge read 1,000,000 files of 100 KB with FastFile: each instance's share, 125,000 GETs x 44.7 ms
    # over 96 readers = 58.203 s plus 12,500 MB at min(1,000, 10,000) = 12.5 s: 70.703 s; but the cluster's 1,000,000
    # GETs share one prefix's 5,500 a second: 181.818 s an epoch.
    from dslab.core.facts.prices import PriceTable
    from dslab.core.model.estimate import estimate_mode
    from dslab.core.shape import DatasetShape
    e = estimate_mode("FastFile", DatasetShape(files=1_000_000, bytes=10**11), instance_type="ml.p4d.24xlarge",
                      instance_count=8, rate=100_000.0, prices=PriceTable())
    _close(e.epoch_seconds, [1_000_000 / 5500])


def test_the_script_streams_large_objects_over_eight_ranged_connections():
    # 100 objects of 100 MB (10 GB): large, so 8 connections (4 shards, 2 ranged GETs each), min(8 x 87.5, 250) = 250
    # MB/s on ml.p3.2xlarge. An epoch: 100 x 27.83 ms / 8 = 0.347875 s plus 10,000 MB / 250 = 40 s. Its GETs: 10 GB
    # in 8 MiB ranges, 1,192.09, at 5,500 a second: 0.22 s, not the bound. The listing: one page, 0.1216 s.
    from dslab.core.facts.prices import PriceTable
    from dslab.core.model.estimate import estimate_mode
    from dslab.core.shape import DatasetShape
    e = estimate_mode("Script", DatasetShape(files=100, bytes=10**10), rate=1_000_000.0, epochs=2, prices=PriceTable())
    _close(e.epoch_seconds, [0.1216 + 40.347875, 40.347875])
    assert "then GETs each object (~28 ms first byte, Mountpoint on EC2) 8 at a time, 250 MB/s at most" in \
        e.assumptions[-1]


def test_an_estimate_refuses_no_epochs_no_readers_and_express_for_a_file_system():
    import pytest

    from dslab.core.errors import ConfigError
    for changes, field in (({"epochs": 0}, "--epochs"), ({"readers": 0}, "readers"), ({"readers": 2.5}, "readers")):
        with pytest.raises(ConfigError) as refused:
            _io_bound("File", **changes)
        assert refused.value.field == field
    with pytest.raises(ConfigError) as refused:
        _io_bound("FSx", storage="express")
    assert refused.value.field == "--mode" and refused.value.problem.startswith("FSx does not read from S3")
    # Readers given: 2 instead of 8 vCPUs: FastFile's GETs over 2 readers, 10,000 x 44.7 ms / 2 = 223.5 s + 4.0 s.
    _close(_io_bound("FastFile", readers=2).epoch_seconds, [227.5, 227.5])


def test_the_models_error_measure_and_the_cells_file(tmp_path):
    import pytest

    from dslab.core.model.estimate import calibration_cells, mape
    # |110 - 100| / 100 and |90 - 100| / 100: 10% on average; |150 - 100| / 100 alone: 50%.
    assert mape([(110.0, 100.0), (90.0, 100.0)]) == pytest.approx(10.0)
    assert mape([(150.0, 100.0)]) == pytest.approx(50.0)
    assert len(calibration_cells()) == 9   # A, B and D: File, FastFile and FSx each
    empty = tmp_path / "cells.csv"
    empty.write_text("# only notes\n")
    with pytest.raises(ValueError, match="no calibration cells"):
        calibration_cells(empty)


def test_fsx_and_efs_options_for_a_checkpoint_run_up_to_what_the_cluster_can_use():
    from dslab.core.model import checkpoint_estimate as ce
    q = _sync_question()
    # 2 kept x 3 GB x 1.05 = 5.9 GiB: every type starts at its smallest, 1,200 GiB. The cluster's network, 250 MB/s,
    # is all a save can use: Scratch 2 writes 100 MB/s per TiB: 117 MB/s at 1,200 GiB, 234 at 2,400, 469 at 4,800
    # (past 250: the last); P2-125 125 per TiB: 146 then 293; P2-250 and up pass 250 at 1,200 GiB.
    found = [(f.deployment_type, f.mbps_per_tib, f.capacity_gib) for f in ce.fsx_options(q)]
    assert found == [("SCRATCH_2", 200.0, 1200), ("SCRATCH_2", 200.0, 2400), ("SCRATCH_2", 200.0, 4800),
                     ("PERSISTENT_2", 125.0, 1200), ("PERSISTENT_2", 125.0, 2400), ("PERSISTENT_2", 250.0, 1200),
                     ("PERSISTENT_2", 500.0, 1200), ("PERSISTENT_2", 1000.0, 1200)]
    # No FSx past the largest the lab builds.
    assert [f.capacity_gib for f in ce.fsx_options(q, max_gib=2400)][:2] == [1200, 2400]
    assert all(f.capacity_gib <= 1200 for f in ce.fsx_options(q, max_gib=1200))
    efs = ce.efs_options(q)
    assert [(e.mode, e.provisioned_mibps) for e in efs[:3]] == [("bursting", None), ("elastic", None),
                                                               ("provisioned", 1.0)]
    assert [e.provisioned_mibps for e in efs[2:]] == [1.0, 10.0, 25.0, 50.0, 75.0, 100.0, 150.0, 200.0, 300.0, 400.0,
                                                      500.0, 750.0, 1000.0, 1024.0, 1500.0, 2000.0, 2500.0, 3000.0,
                                                      3414.0]
    assert {e.region for e in efs} == {"us-east-1"}
    # Each candidate carries the deploy that builds it, and is named with its premise unless it is the lab's own.
    fsx = ce.candidates(q, "fsx", "provisioned for the question")
    assert len(fsx) == 8 and fsx[1].settings == {"fsxDeploymentType": "SCRATCH_2", "fsxCapacity": 2400}
    assert ce.option_name(fsx[0]) == ("FSx (Scratch 2, 1,200 GiB (writes 117 MB/s, reads 234 MB/s uncached), "
                                      "provisioned for the question)")
    elastic = ce.candidates(q, "efs", "as deployed")[1]
    assert elastic.settings == {"efsPerformance": "generalPurpose", "efsThroughput": "elastic"}
    assert ce.option_name(elastic) == "EFS (EFS Elastic (General Purpose))"


def test_the_instances_volume_writes_at_gp2s_rate_for_its_size_or_nvmes():
    from dslab.core.model import checkpoint_estimate as ce
    mib = 1.048576
    # gp2: 170 GB and under 128 MiB/s; above 170 and under 334 it bursts to 250 MiB/s (said); 334 and up 250 MiB/s.
    assert ce.volume_mbps("ml.p3.2xlarge", 170, False) == (128 * mib, None)
    rate, note = ce.volume_mbps("ml.p3.2xlarge", 200, False)
    assert rate == 250 * mib and note == ("a gp2 volume of 200 GB between 170 and 334 GiB bursts to 250 MiB/s (its "
                                          "burst credits assumed)")
    assert ce.volume_mbps("ml.p3.2xlarge", 334, False) == (250 * mib, None)
    assert ce.volume_mbps("ml.p5.48xlarge", 30_400, True) == (1000.0, ce.nvme_assumption())
    assert ce.nvme_assumption() == ("NVMe instance storage writes and reads at 1,000 MB/s per instance (an assumption: "
                                    "AWS publishes its IOPS, not MB/s)")
    assert ce.sync_assumption() == ("SageMaker's checkpoint upload and copy-in: how they move bytes is not "
                                    "documented; assumed 8 MiB parts, 10 at once per instance (the AWS CLI's "
                                    "defaults) at 87.5 MB/s each, up to the instance's network")


def test_a_two_host_checkpoint_copies_every_hosts_files_onto_each_instance_at_a_restore():
    from dslab.core.model import checkpoint_estimate as ce
    # Two hosts, each one rank saving 1 GB: 2 GB a checkpoint, the largest host 1 GB; 120 parts each, 240 in all.
    ranks = {0: [SimpleNamespace(files=[("r0.pt", 10**9)])], 1: [SimpleNamespace(files=[("r1.pt", 10**9)])]}
    plan = SimpleNamespace(hosts=2, scale=1.0, host_ranks=lambda host: ranks[host])
    q = _sync_question(plan=plan)
    load = q.load
    assert (load.total_bytes, load.host_bytes, load.parts, load.host_parts, load.files) == (2 * 10**9, 10**9, 240,
                                                                                            120, 2)
    e = ce.estimate_target(q, "s3")
    # Each instance uploads its own 1 GB at 250 MB/s: 4 s; a restore copies both kept checkpoints of both hosts, 4 GB,
    # onto each instance at min(250, 134.217728) MB/s, then reads its own 1 GB back; 240 x 2 kept x 2 hosts = 960 GETs.
    gp2 = 128 * 1.048576
    _close([e.upload_seconds, e.copy_in_seconds, e.restore_seconds], [4.0, 4000 / gp2, 5000 / gp2])
    assert (e.puts_per_save, e.gets_per_restore) == (240, 960)
    # The idle instances: both wait during a stall.
    _close(e.idle_usd_per_save, 1000 / gp2 * 2 * 3.825 / 3600)
    blocked = ce.estimate_target(_sync_question(plan=plan, keep=60, volume_size_gb=100), "s3")   # 2 GB x 60: 120 GB
    assert ", every host's: SageMaker copies the whole S3 URI onto each instance)" in blocked.blocker


def test_an_express_estimates_range_is_moved_by_the_constants_of_the_directory_bucket():
    # Express FastFile on the I/O-bound input: the share of FastFile's GET that S3 sets, at its slow end on Express
    # (its low end, 27.83 / 44.7 = 0.6226: less of the GET shortened), makes each GET 44.7 ms x (1 - 0.6226 x
    # (1 - 0.225584)) = 23.148 ms: an epoch of 10,000 x 23.148 / 8 + 4.0 = 32.935 s against 16.604 s. Billable: 17.218
    # + 15.4 + 2 x 32.935 + 197.182 = 295.67 s against 263.01 s: +12.4%. On S3 Standard nothing ranged moves it 0.5%.
    from dslab.core.facts.prices import PriceTable
    from dslab.core.model.calibration import with_range
    from dslab.core.shape import DatasetShape
    shape, kwargs = DatasetShape(**SHAPE), {"rate": 10_000.0, "epochs": 2, "prices": PriceTable()}
    express = with_range(_io_bound("FastFile", storage="express"), shape, **kwargs)
    ratio = 0.006278 / 0.02783
    share = 0.02783 / 0.0447
    slow_epoch = 10_000 * 0.0447 * (1 - share * (1 - ratio)) / 8 + 4.0
    point_epoch = 10_000 * 0.0447 * ratio / 8 + 4.0
    listing = 15.4 + 10_000 / 5500
    slow = listing + 15.4 + 2 * slow_epoch + (214.4 - listing)
    point = listing + 15.4 + 2 * point_epoch + (214.4 - listing)
    moves = [(a.name, s) for a, _, s in express.range.moves]
    assert [name for name, _ in moves] == ["fastfile_s3_share", "express_first_byte", "s3_standard_first_byte"]
    _close(moves[0][1], slow / point - 1)
    standard = with_range(_io_bound("FastFile"), shape, **kwargs)
    assert standard.range.moves == [] and standard.range.measured and not express.range.measured


def test_a_sync_whose_upload_takes_exactly_the_interval_keeps_up_and_every_target_is_estimated_in_order():
    from dslab.core.model import checkpoint_estimate as ce
    # The 12 s upload every 12 s: it ends as the next save starts, which keeps up.
    assert ce.estimate_target(_sync_question(every_seconds=12.0), "s3").warnings == []
    assert [e.target for e in ce.estimate_targets(_sync_question())] == ["s3", "express", "fsx", "efs"]
    assert [e.target for e in ce.estimate_targets(_sync_question(), ("efs",))] == ["efs"]
    import pytest

    from dslab.core.errors import ConfigError
    with pytest.raises(ConfigError) as refused:
        ce.estimate_target(_sync_question(), "tape")
    assert refused.value.field == "checkpoint target" and refused.value.problem == "'tape' is not one"


def test_an_unknown_instance_is_taken_as_8_vcpus_and_10_gbits_and_the_refusals_name_what_is_allowed():
    import pytest

    from dslab.core.errors import ConfigError
    from dslab.core.facts.prices import PriceTable
    priced = PriceTable()
    priced.data["instance_hourly"]["ml.x9.huge"] = 1.0
    # 8 readers: FastFile's 10,000 GETs x 44.7 ms / 8 = 55.875 s, plus 1,000 MB at min(1,000 streamed, 10 Gbit/s x
    # 125 x 0.8 = 1,000) = 1.0 s. The script: 64 GETs in flight, 10,000 x 27.83 ms / 64 = 4.3484375 s, plus 1,000 MB at
    # min(64 x 87.5, 1,000) = 1.0 s.
    _close(_io_bound("FastFile", instance_type="ml.x9.huge", prices=priced).epoch_seconds[0], 56.875)
    _close(_io_bound("Script", instance_type="ml.x9.huge", prices=priced).epoch_seconds[1], 5.3484375)
    for mode, changes, field, problem, allowed in (
            ("Tape", {}, "--mode", "unknown mode 'Tape'", ["File", "FastFile", "Pipe", "FSx", "EFS", "Script"]),
            ("EFS", {"storage": "express"}, "--mode", "EFS does not read from S3: S3 Express One Zone serves File, "
             "FastFile, Pipe and scripts that read S3 themselves", ["File", "FastFile", "Pipe", "Script"]),
            ("File", {"epochs": 0}, "--epochs", "must be at least 1", None)):
        with pytest.raises(ConfigError) as refused:
            _io_bound(mode, **changes)
        assert (refused.value.field, refused.value.problem, refused.value.allowed) == (field, problem, allowed)


def test_the_cluster_is_said_where_an_instance_has_several_accelerators_or_the_job_several_instances():
    said = "1 instance(s) x 2 accelerator(s), each at the compute's rate"
    assert _io_bound("File", accelerators=2).assumptions[0].startswith(said)
    assert _io_bound("File", instance_count=2).assumptions[0].startswith("2 instance(s) x 1 accelerator(s)")
    assert not _io_bound("File").assumptions[0].startswith("1 instance(s)")


def test_large_objects_are_requested_in_8_mib_ranges_and_a_1_mb_object_is_still_small():
    from dslab.core.facts.prices import PriceTable
    from dslab.core.model.estimate import estimate_mode
    from dslab.core.shape import DatasetShape
    # 64 x ml.p4d.24xlarge on 10,000 objects of 100 MB (1 TB) with FastFile: each instance reads 15,625 MB at 1,000
    # MB/s (15.6 s, plus 157 GETs x 44.7 ms / 96); the cluster's GETs are 1 TB / 8 MiB = 119,209.29 ranges, at 5,500 a
    # second on one prefix: 21.674 s an epoch, the bound.
    big = estimate_mode("FastFile", DatasetShape(files=10_000, bytes=10**12), instance_type="ml.p4d.24xlarge",
                        instance_count=64, rate=10**7, prices=PriceTable())
    _close(big.epoch_seconds, [10**12 / (8 * 2**20) / 5500])
    # Objects of exactly 1 MB are small: the script keeps 64 GETs in flight (1,000 x 27.83 ms / 64 = 0.43484375 s, plus
    # 1,000 MB at 250 MB/s).
    edge = estimate_mode("Script", DatasetShape(files=1_000, bytes=10**9), rate=10**7, epochs=2, prices=PriceTable())
    _close(edge.epoch_seconds[1], 1_000 * 0.02783 / 64 + 4.0)
    # One reader is allowed; none is refused with what to give.
    _close(_io_bound("FastFile", readers=1).epoch_seconds[0], 10_000 * 0.0447 + 4.0)
    import pytest

    from dslab.core.errors import ConfigError
    with pytest.raises(ConfigError) as refused:
        _io_bound("FastFile", readers=0)
    assert refused.value.problem == "0: give the files one instance reads at once, 1 or more"


def test_the_volume_asked_for_is_the_one_priced_and_said():
    e = _io_bound("File", volume_size_gb=500)
    assert e.volume_gb == 500
    assert e.assumptions[0] == ("File: downloads 1.00 GB in 10,000 objects onto each instance's storage, a 500 GB EBS "
                                "volume (asked for), at 158 MB/s plus 7.3 ms per object")
    # Too small for the copy: 1 GB with 5% headroom does not fit 1 GB.
    assert _io_bound("File", volume_size_gb=1).blocker is not None


def test_files_copy_sizes_the_default_volume_and_a_replicated_copy_gets_every_object_on_every_instance():
    from dslab.core.facts.prices import PriceTable
    from dslab.core.model.estimate import estimate_mode
    from dslab.core.shape import DatasetShape
    # 200 GB on ml.p3.2xlarge (EBS): File's copy needs 200 x 1.05 = 210 GB, so the default volume grows to it; the
    # other sources keep the 100 GB default (nothing is copied onto it).
    shape = DatasetShape(files=10_000, bytes=200 * 10**9)
    assert [estimate_mode(m, shape, rate=10_000.0, prices=PriceTable()).volume_gb for m in ("File", "FastFile")] == \
        [210, 100]
    # 64 x ml.p4d.24xlarge, FullyReplicated: every instance copies all 1,000,000 objects of 100 KB; NVMe at min(1,000,
    # 10,000) MB/s: 100,000 MB in 100 s plus 1,000,000 x 7.27 ms = 7,270 s. The bucket serves the cluster's 64 x
    # 1,000,000 GETs at 5,500 a second: 11,636.36 s, the bound. Downloading: 15.1 + 11,636.36 s an instance.
    replicated = estimate_mode("File", DatasetShape(files=1_000_000, bytes=10**11), instance_type="ml.p4d.24xlarge",
                               instance_count=64, sharded=False, rate=10**7, prices=PriceTable())
    _close(replicated.downloading / 64, 15.1 + 64 * 1_000_000 / 5500)
    assert replicated.assumptions[-1].startswith("File: downloads 100.00 GB in 1,000,000 objects onto each instance's")
    # Sharded, each instance copies its 15,625 objects (113.6 s), but the cluster's 1,000,000 GETs, once each, take
    # 181.82 s on one prefix: the bound.
    sharded = estimate_mode("File", DatasetShape(files=1_000_000, bytes=10**11), instance_type="ml.p4d.24xlarge",
                            instance_count=64, rate=10**7, prices=PriceTable())
    _close(sharded.downloading / 64, 15.1 + 1_000_000 / 5500)


def test_pipe_on_a_cluster_streams_each_object_once_sharded_and_to_every_instance_replicated():
    from dslab.core.facts.prices import PriceTable
    from dslab.core.model.estimate import estimate_mode
    from dslab.core.shape import DatasetShape
    shape = DatasetShape(files=1_000_000, bytes=10**11)
    kwargs = {"instance_type": "ml.p4d.24xlarge", "instance_count": 64, "rate": 10**7, "prices": PriceTable()}
    # Sharded: each instance streams 15,625 objects (54.3 s of first bytes over 8, plus 1,562.5 MB at 300 MB/s); the
    # cluster's 1,000,000 GETs take 181.82 s on one prefix: the bound. Replicated: each streams all 1,000,000 (3,812 s);
    # the cluster's 64,000,000 GETs take 11,636.36 s.
    _close(estimate_mode("Pipe", shape, **kwargs).epoch_seconds, [1_000_000 / 5500])
    _close(estimate_mode("Pipe", shape, sharded=False, **kwargs).epoch_seconds, [64_000_000 / 5500])


def test_the_scripts_listing_takes_a_page_per_started_thousand_keys():
    from dslab.core.facts.prices import PriceTable
    from dslab.core.model.estimate import estimate_mode
    from dslab.core.shape import DatasetShape
    # 1,001 keys: two pages of 121.6 ms, in the first epoch only.
    e = estimate_mode("Script", DatasetShape(files=1_001, bytes=10**8), rate=10**7, epochs=2, prices=PriceTable())
    _close(e.epoch_seconds[0] - e.epoch_seconds[1], 2 * 0.1216)
    assert e.assumptions[-1].startswith("Script: the script lists the prefix (2 pages of 1,000 keys, ~122 ms each")


def test_fsxs_needed_capacity_carries_the_headroom_its_import_is_said_in_minutes_and_128_kib_files_sit_in_ia():
    from dslab.core.facts.prices import PriceTable
    from dslab.core.model.estimate import estimate_mode
    from dslab.core.shape import DatasetShape
    # 2,300 GiB x 1.05 = 2,415 GiB: past 2,400, so 4,800 (without the headroom 2,400 would do).
    big = estimate_mode("FSx", DatasetShape(files=1000, bytes=2300 * 2**30), rate=10_000.0, prices=PriceTable())
    assert big.blocker.endswith("cannot hold 2,300 GiB: it needs 4,800 GiB or more")
    # 2,000,000 objects index in an hour: "~60 min".
    many = estimate_mode("FSx", DatasetShape(files=2_000_000, bytes=10**11), rate=10**7, prices=PriceTable())
    assert "creating the file system indexes 2,000,000 objects in ~60 min" in many.assumptions[-1]
    # Files of exactly 128 KiB (131,072 bytes) move to Infrequent Access: the first epoch reads them from there.
    edge = estimate_mode("EFS", DatasetShape(files=1000, bytes=1000 * 131_072), rate=10_000.0, prices=PriceTable(),
                         efs_resident=True)
    assert edge.assumptions[-1].startswith("EFS: the dataset lives in EFS; unread for 7 days, its files of 128 KiB")


def test_the_break_even_names_the_cheaper_at_the_start_and_the_first_epoch_count_where_the_other_is():
    from dslab.core.facts.prices import PriceTable
    from dslab.core.model.estimate import fsx_express_break_even
    from dslab.core.shape import DatasetShape
    even = fsx_express_break_even(DatasetShape(files=10_000, bytes=10**11), max_epochs=40, prices=PriceTable(),
                                  rate=2000.0)
    # The rule: FSx where it costs no more; the crossover is the first epoch count where the cheaper one changes.
    cheaper = ["FSx" if f <= e else "Express FastFile" for f, e in zip(even.fsx_usd, even.express_usd)]
    assert even.cheaper_at_start == cheaper[0] == "FSx"
    assert even.crossover == next(n for n, c in zip(even.epochs, cheaper) if c != "FSx")
    assert cheaper[even.crossover - 2] == "FSx" and cheaper[even.crossover - 1] == "Express FastFile"
    assert len(even.epochs) == 40 and even.epochs[-1] == 40
    # Keeping the 100 GB copy: 100 x the GB-month price.
    month = PriceTable()["express_gb_month"] * 100
    assert even.assumptions[1] == ("Express: the staging copy once per run, the job's GETs and retrieval, the copy's "
                                   "storage while it exists, emptied after the run (`dslab express empty`); keeping it "
                                   f"costs ${month:.2f} per month")
    # The default: 100 epoch counts.
    assert fsx_express_break_even(DatasetShape(files=10_000, bytes=10**9), prices=PriceTable(),
                                  rate=2000.0).epochs == list(range(1, 101))


# ---- a run's checkpoint records, read per trial and target ---------------------------------------------------------

def _ckpt(target, status="Completed", restore=False, cluster=None, **figures):
    record = {"checkpoint_target": target, "trial": "save", "dataset": "llama3-8b", "status": status,
              "job_name": f"{target}-{'restore' if restore else 'write'}-{len(figures)}",
              "instance_type": "ml.p5.48xlarge",
              "instance_count": 2, "cost_usd": {"total": 1.25}, "checkpoint_restore": restore,
              "metrics": {"checkpoint": figures, **({"cluster": {"checkpoint": cluster}} if cluster else {})}}
    if restore:
        record["phases"] = {"Downloading": figures.pop("downloading", 0.0)}
    if status != "Completed":
        record["failure_reason"] = "AlgorithmError: out of memory"
    return record


def test_a_runs_checkpoint_records_are_averaged_per_target_the_sync_restore_adding_its_copy_in():
    from dslab.core.model import checkpoint_estimate as ce
    records = [
        # S3 sync: two writers (saves of 10 and 14 s; stalls 2 and 4 s; durable at 20 and 30 s), one failed, one
        # restore job whose copy-in took 50 s and whose reads 6 s.
        _ckpt("s3", save_seconds_mean=10.0, stall_seconds_mean=2.0, durable_seconds_mean=20.0,
              save_gb_per_second_mean=1.0, bytes_per_checkpoint=16 * 10**9),
        _ckpt("s3", save_seconds_mean=14.0, stall_seconds_mean=4.0, durable_seconds_mean=30.0,
              save_gb_per_second_mean=2.0),
        _ckpt("s3", status="Failed"),
        _ckpt("s3", restore=True, load_seconds_mean=6.0, load_gb_per_second_mean=3.0, downloading=50.0),
        # FSx: one writer whose cluster figure (the slowest host's) stands for it, no restore job: its own reads.
        _ckpt("fsx", save_seconds_mean=5.0, stall_seconds_mean=5.0, load_seconds_mean=4.0,
              cluster={"save_seconds_mean": 7.0, "stall_seconds_mean": 7.0, "load_seconds_mean": 5.0,
                       "load_gb_per_second_mean": 3.2}),
        {"job_name": "data-job", "status": "Completed", "dataset": "d"}]   # not a checkpoint record
    s3, fsx = ce.measured_targets(records)
    assert (s3.target, s3.jobs, s3.completed, s3.runs, s3.read_apart) == ("s3", 4, 3, 2, 1)
    assert (s3.save_seconds, s3.stall_seconds, s3.durable_seconds, s3.save_gb_per_second) == (12.0, 3.0, 25.0, 1.5)
    # The restore: the copy-in (SageMaker's Downloading) plus the reads.
    assert (s3.copy_in_seconds, s3.load_seconds, s3.restore_seconds, s3.load_gb_per_second) == (50.0, 6.0, 56.0, 3.0)
    assert s3.bytes_per_checkpoint == 16 * 10**9 and s3.cost_usd == 5.0
    assert s3.failures == ["s3-write-0: AlgorithmError: out of memory"]
    assert (s3.instance_type, s3.instance_count, s3.trial, s3.model) == ("ml.p5.48xlarge", 2, "save", "llama3-8b")
    # FSx: the cluster's figures; a file system holds a save once written: durable at the save; no copy-in.
    assert (fsx.save_seconds, fsx.stall_seconds, fsx.durable_seconds) == (7.0, 7.0, 7.0)
    assert (fsx.load_seconds, fsx.restore_seconds, fsx.copy_in_seconds, fsx.load_gb_per_second) == (5.0, 5.0, None,
                                                                                                    3.2)
    # The pick: the soonest durable save (FSx's 7 s before the sync's 25 s), the sync the runner-up.
    assert ce.measured_pick([s3, fsx]) == (fsx, s3)
    assert ce.measured_pick([]) == (None, None)
    # What keeps them from MLPerf's figures: the sync read apart once in two runs; FSx read in its writer.
    assert s3.mlperf_sequence() == ["read back in the writing job (checkpoint.restore: false), not a new one",
                                    "2 run(s), where MLPerf takes the mean of 5 (repeats: 5)", ce.MLPERF_SAME_MACHINES]
    full = ce.MeasuredTarget("t", "m", "efs", 10, 10, 1.0, 1.0, 1.0, None, None, 1.0, None, None, "x", 1, 0.0,
                             runs=5, read_apart=5)
    assert full.mlperf_sequence() == [ce.MLPERF_SAME_MACHINES] and full.label == "EFS"


def test_what_fsx_left_standing_bills_under_the_idle_guard_or_without_it():
    from dataclasses import replace

    from dslab.core.facts.prices import PriceTable
    from dslab.core.model.provisioning import AS_DEPLOYED, FsxConfig
    prices = PriceTable()
    # Scratch 2 at 1,200 GiB: 1,200 x $0.14 / 730 = $0.230137 an hour. The guard deletes it 8 h after the last run, up
    # to one 30-minute check later: 8 x 0.230137 = $1.84 to 8.5 x 0.230137 = $1.96.
    assert AS_DEPLOYED.fsx_left_standing(prices) == (
        "left standing, the lab's idle guard deletes it 8 to 8.5 h after the last run (fsxIdleHours=8, checked every "
        "30 min): $1.84 to $1.96 more")
    # An hour: $0.23 to $0.35 (1.5 h).
    assert replace(AS_DEPLOYED, fsx_idle_hours=1.0).fsx_left_standing(prices).endswith(": $0.23 to $0.35 more")
    assert replace(AS_DEPLOYED, fsx_idle_hours=0.0).fsx_left_standing(prices) == (
        "the lab's idle guard is off (fsxIdleHours=0): left standing, FSx bills $0.23 an hour")
    assert replace(AS_DEPLOYED, fsx_idle_hours=None).fsx_left_standing(prices) == (
        "left standing, FSx bills $0.23 an hour until the lab's idle guard deletes it")
    # Another FSx than the lab's: 2,400 GiB bills $0.46 an hour.
    assert AS_DEPLOYED.fsx_left_standing(prices, FsxConfig(capacity_gib=2400)).endswith(": $3.68 to $3.91 more")


def test_provisioned_efs_without_a_rate_reads_as_1_mibps_and_bills_none_and_fsx_holds_exactly_its_capacity():
    from dslab.core.facts.prices import PriceTable
    from dslab.core.model.provisioning import EfsConfig, FsxConfig
    unset = EfsConfig("provisioned")
    assert unset.read_mibps(0.0) == 3.0   # 1 MiB/s, reads metered at a third
    assert unset.throughput_usd(PriceTable(), hours=730.0, gb_read=0.0) == 0.0
    assert (unset.short(), unset.label()) == ("EFS Prov. 0 MiB/s", "EFS Provisioned 0 MiB/s")
    # 200 MiB/s provisioned for a month: 200 x $6.
    assert EfsConfig("provisioned", 200.0).throughput_usd(PriceTable(), hours=730.0, gb_read=0.0) == 1200.0
    # 2,000 GiB x 1.05 = 2,100 GiB: exactly what a 2,100 GiB file system holds.
    assert FsxConfig(capacity_gib=2100).holds(2000 * 2**30)


def test_a_checkpoint_options_record_carries_its_deploy_and_quota_and_fsx_is_brought_up():
    from dslab.core.model import checkpoint_estimate as ce
    from dslab.core.model.provisioning import FsxConfig
    q = _sync_question()
    elastic = ce.candidates(q, "efs", "provisioned for the question")[1]
    assert elastic.command() == 'make deploy FSX=keep CONTEXT="efsPerformance=generalPurpose efsThroughput=elastic"'
    record = elastic.to_dict()
    assert (record["deploy_settings"], record["command"], record["target"], record["label"]) == (
        {"efsPerformance": "generalPurpose", "efsThroughput": "elastic"}, elastic.command(), "efs", "EFS")
    assert "quota" not in record and "blocker" not in record and "upload_seconds" not in record
    big = ce._fsx(q, FsxConfig.persistent2(1000, 120_000), "provisioned for the question",
                  FsxConfig.persistent2(1000, 120_000).settings())
    assert big.command().startswith('make deploy FSX=up CONTEXT="fsxDeploymentType=PERSISTENT_2 ')
    assert big.to_dict()["quota"]["needed_gib"] == 120_000
    assert ce.estimate_target(q, "s3").command() is None and "command" not in ce.estimate_target(q, "s3").to_dict()
    # A day's total: the idle instances' share of each save, plus storage, requests and what stands.
    fsx = ce.estimate_target(q, "fsx")
    _close(fsx.usd_per_day, fsx.idle_usd_per_save * 144 + fsx.standing_usd_per_day)
    assert fsx.to_dict()["usd_per_day"] == round(fsx.usd_per_day, 2)


def test_a_settings_null_empty_or_exact_limit_and_a_link_persistent_2_cannot_take():
    from dslab.core.model.provisioning import as_deployed
    assert _lab(fsxCapacity="null").fsx.capacity_gib == 1200 and _lab(fsxCapacity="").fsx.capacity_gib == 1200
    assert _lab(fsxIdleHours="").fsx_idle_hours == 8.0 and _lab(efsPerformance="").efs.performance is None
    assert _lab(efsThroughput="provisioned", efsProvisionedMibps="1").efs.provisioned_mibps == 1.0
    e = _refused(fsxDeploymentType="PERSISTENT_2", fsxThroughputPerTiB="250", fsxLink="import-path")
    assert (e.field, e.problem) == ("fsxLink", "PERSISTENT_2 links to S3 only through a data repository association: "
                                               "the legacy import path is for Scratch 1, Scratch 2 and Persistent 1 "
                                               "(cdk.json)")
    assert _lab(fsxLink="import-path").fsx.deployment_type == "SCRATCH_2"   # Scratch 2 may take the import path
    assert as_deployed(2400).fsx.capacity_gib == 2400 and as_deployed(efs_provisioned_mibps=300.0).efs.mode == \
        "provisioned"


def test_a_checkpoints_tiny_file_is_one_part_its_day_saves_at_two_decimals_and_seven_days_is_the_longest():
    import pytest

    from dslab.core.errors import ConfigError
    from dslab.core.model import checkpoint_estimate as ce
    rank = SimpleNamespace(files=[("tiny.json", 1), ("empty", 0), ("model.pt", 8 * 2**20 + 1)])
    plan = SimpleNamespace(hosts=1, scale=1.0, host_ranks=lambda host: [rank])
    load = ce.CheckpointLoad.of(plan)
    # A 1-byte file is one part; an empty one none; 8 MiB + 1 byte two.
    assert (load.hosts, load.parts, load.files) == (1, 3, 3)
    # Every 7 minutes: 86,400 / 420 = 205.714 saves a day, 205.71 in the record.
    assert ce.estimate_target(_sync_question(every_seconds=420.0), "fsx").to_dict()["saves_per_day"] == 205.71
    assert ce.parse_duration("168h", "--every") == 604_800
    with pytest.raises(ConfigError) as refused:
        ce.parse_duration("168.1h", "--every")
    assert refused.value.allowed == "e.g. 30m, 2h, 90s (1 s to 7 days)"


def test_a_two_host_sync_of_many_small_files_is_held_to_s3s_request_rates_and_pays_every_hosts_gets():
    from dslab.core.model import checkpoint_estimate as ce
    # Two hosts, each saving 100,000 files of 10 KB (1 GB): 100,000 parts each, 200,000 in all.
    ranks = {h: [SimpleNamespace(files=[(f"s{i}", 10_000) for i in range(100_000)])] for h in (0, 1)}
    plan = SimpleNamespace(hosts=2, scale=1.0, host_ranks=lambda host: ranks[host])
    q = _sync_question(plan=plan)
    s3 = ce.estimate_target(q, "s3")
    # The upload: 200,000 PUTs at 3,500 a second on one prefix = 57.14 s, more than 1,000 MB at 250 MB/s (4 s).
    _close(s3.upload_seconds, 200_000 / 3500)
    assert s3.bound.endswith("the upload behind it: S3's PUT rate")
    assert s3.to_dict()["upload_seconds"] == 57.14
    # The copy-in: 200,000 parts x 2 kept x 2 hosts = 800,000 GETs at 5,500 a second = 145.45 s (4 GB at 134 MB/s
    # would take 29.8 s).
    _close(s3.copy_in_seconds, 800_000 / 5500)
    gp2 = 128 * 1.048576
    restore = 800_000 / 5500 + 1000 / gp2
    _close(s3.restore_usd, restore * 2 * 3.825 / 3600 + 800_000 * 0.4 / 1e6)
    # Express: its own prices, per thousand GETs and per GB retrieved, every host's: 800,000 GETs and 2 x 4 GB.
    express = ce.estimate_target(q, "express")
    prices = q.prices
    requests = 800_000 * prices["express_get_per_thousand"] / 1000 + 4e9 * 2 / 1e9 * prices["express_retrieval_per_gb"]
    _close(express.restore_usd, express.restore_seconds * 2 * 3.825 / 3600 + requests)


def test_checkpoint_boundaries_and_words_where_nvme_or_one_host_or_elastic_set_them():
    from dslab.core.model import checkpoint_estimate as ce
    from dslab.core.model.provisioning import EfsConfig
    # FSx saving in exactly its interval keeps up; a checkpoint that fills FSx exactly fits.
    assert ce.estimate_target(_sync_question(every_seconds=25.6), "fsx").warnings == []
    # One host, too many kept: no word of every host's copy.
    blocked = ce.estimate_target(_sync_question(keep=40, volume_size_gb=100), "s3")
    assert "every host's" not in blocked.blocker and "(40 kept)" in blocked.blocker
    # On NVMe the way out is more instances (its size is fixed): ml.p5.48xlarge holds 30,400 GB.
    rank = SimpleNamespace(files=[("model.pt", 2000 * 10**9)])
    p5 = _sync_question(plan=SimpleNamespace(hosts=1, scale=1.0, host_ranks=lambda host: [rank]),
                        instance_type="ml.p5.48xlarge", keep=20)
    nvme = ce.estimate_target(p5, "s3")
    assert nvme.blocker.endswith("fewer kept (--keep), a smaller --scale, more instances")
    # p5's network is its primary card's share: said.
    assert len(p5.network_said()) == 1 and nvme.assumptions[-1] == p5.network_said()[0]
    assert _sync_question().network_said() == []   # ml.p3.2xlarge has one card: nothing to say
    assert ce._efs_write_mibps(EfsConfig("elastic"), 0.0, 0.0) == (
        5120.0, "Elastic's per-file-system write limit in us-east-1 (5 GiB/s)")


def test_efs_as_a_checkpoint_target_says_its_regions_limits_and_reads_back_for_free_unless_elastic():
    from dslab.core.model import checkpoint_estimate as ce
    e = ce.estimate_target(_sync_question(every_seconds=86_400.0), "efs")
    assert e.assumptions[0] == ("EFS's per-file-system limits in us-east-1: 5 GiB/s reads, 3 GiB/s writes "
                                f"({ce.EFS_LIMITS_SOURCE})")
    # Bursting reads cost nothing beyond the idle instances: 12 s of restore.
    _close(e.restore_usd, 12.0 * 3.825 / 3600)


def test_each_checkpoint_target_names_how_the_lab_stands_and_fsx_starts_where_the_kept_checkpoints_fit():
    import pytest
    from dataclasses import replace

    from dslab.core.errors import ConfigError
    from dslab.core.model import checkpoint_estimate as ce
    from dslab.core.model.provisioning import AS_DEPLOYED
    # FSx as cdk.json would build it, EFS as deployed (its stack outputs).
    lab = replace(AS_DEPLOYED, fsx_source="cdk.json", efs_source="cdk-outputs.json")
    q = _sync_question(lab=lab)
    assert ce.estimate_target(q, "fsx").premise == "as cdk.json would deploy it"
    assert ce.estimate_target(q, "efs").premise == "as deployed"
    with pytest.raises(ConfigError) as refused:
        ce.estimate_target(q, "tape")
    assert refused.value.allowed == ["s3", "express", "fsx", "efs"]
    # 420 kept of 3 GB, with 5% headroom: 1,232 GiB, past 1,200: every type starts at 2,400 GiB.
    assert {f.capacity_gib for f in ce.fsx_options(_sync_question(keep=420))} >= {2400}
    assert min(f.capacity_gib for f in ce.fsx_options(_sync_question(keep=420))) == 2400


def test_a_restore_without_its_phases_copies_in_nothing_and_a_clusters_restore_is_its_slowest_hosts():
    from dslab.core.model import checkpoint_estimate as ce
    restore = _ckpt("express", restore=True, load_seconds_mean=3.0, cluster={"load_seconds_mean": 9.0,
                                                                           "load_gb_per_second_mean": 0.5})
    del restore["phases"]
    writer = _ckpt("express", save_seconds_mean=4.0, stall_seconds_mean=1.0)
    (express,) = ce.measured_targets([writer, restore])
    # No Downloading recorded: a copy-in of 0 s; the reads are the cluster's slowest host's, 9 s.
    assert (express.copy_in_seconds, express.load_seconds, express.restore_seconds, express.load_gb_per_second) == \
        (0.0, 9.0, 9.0, 0.5)
    # A sync without a durable figure ranks after one with it.
    fsx = ce.measured_targets([_ckpt("fsx", save_seconds_mean=30.0, stall_seconds_mean=30.0)])[0]
    assert express.durable_seconds is None and ce.measured_pick([express, fsx]) == (fsx, express)


def test_a_fold_without_b_takes_files_copy_start_from_fsxs_mount_and_ebs_from_d_alone():
    # Without B no File shard cell is small: the copy's start is FSx's mount, A, C and D's FSx Downloading:
    # (10.4 + 12.1 + 12.1) / 3 = 11.5333 s, from none to twice it. EBS's rate rests on D alone: 54,000 MB over its
    # Downloading less that start, 357.3 - 11.5333 = 345.7667 s: 156.17 MB/s, ranged by D's repeats (+-50 s).
    fitted = _fit_without("B")
    fixed, ebs = fitted["file_download_fixed"], fitted["ebs_download_mbps"]
    mount = (10.4 + 12.1 + 12.1) / 3
    _close([fixed.value, fixed.low, fixed.high], [mount, 0.0, 2 * mount])
    assert (fixed.cells, fixed.why) == ((), "no cell left: FSx's mount, from none to twice it")
    assert fixed.rule == "File's copy start: File on shards, Downloading less the bytes"
    _close([ebs.value, ebs.low, ebs.high], [54_000 / (357.3 - mount), 54_000 / (357.3 - mount + 50.0),
                                            54_000 / (357.3 - mount - 50.0)])
    assert (ebs.cells, ebs.why) == (("D File",), "rests on one cell (D File): its repeats' range")
    assert ebs.rule == "File onto EBS: File on shards, the bytes over Downloading less the start"
    # Every cell: the other floor rests on the File cells with a long download, A, C and D: (46.3 + 63.5 + 52.5) / 3.
    floor = _fit_without()["other_floor"]
    _close(floor.value, (46.3 + 63.5 + 52.5) / 3)
    assert floor.rule == "upload and shutdown: File cells with a long download, other"
    assert _fit_without()["mount_fixed"].rule == "FSx's mount: the FSx cells' Downloading"


def test_a_sources_error_is_its_folds_widest_misses_and_its_cells_widest_spread():
    from dslab.core.model.calibration import Calibration, Fold, Prediction
    # Two folds: File predicted 10% low in A (90 / 100) and 20% high in B (120 / 100); FastFile 5% high in A.
    folds = [Fold("A", {}, [Prediction("A", "File", 100.0, 90.0, 80.0, 110.0),
                            Prediction("A", "FastFile", 100.0, 105.0)]),
             Fold("B", {}, [Prediction("B", "File", 100.0, 120.0, 130.0, 140.0)])]
    cells = [SimpleNamespace(mode="File", scenario="A", spread=0.03), SimpleNamespace(mode="File", scenario="B",
                                                                                      spread=0.07),
             SimpleNamespace(mode="FastFile", scenario="A", spread=0.02)]
    cal = Calibration(cells, {}, folds)
    file_error = cal.error("File")
    _close([file_error.under, file_error.over, file_error.spread], [-0.1, 0.2, 0.07])
    assert file_error.scenarios == ("A", "B")
    # Without B: only A's miss and A's spread.
    without_b = cal.error("File", without="B")
    _close([without_b.under, without_b.over, without_b.spread], [-0.1, 0.0, 0.03])
    assert without_b.scenarios == ("A",)
    # A prediction inside its interval, and one outside it.
    assert folds[0].predictions[0].inside and not folds[1].predictions[0].inside
    _close(folds[0].predictions[0].error, -0.1)
    # A source with no fold: no miss either way; nothing measured: no spread.
    none = cal.error("EFS")
    assert (none.under, none.over, none.spread) == (0.0, 0.0, 0.0)


def test_a_fitted_constant_reads_in_ms_under_1_in_mbs_for_a_rate_else_in_seconds_and_fastfiles_get_by_hand():
    from dslab.core.model.calibration import Fitted
    latency = Fitted("fastfile_get_latency", 0.0447, ("A FastFile",), "FastFile's per-file GET: on JPEGs", 0.04, 0.05,
                     "why").as_assumption()
    assert (latency.name, latency.what, latency.low, latency.high, latency.source, latency.unit, latency.scale) == (
        "fastfile_get_latency", "FastFile's per-file GET", 0.04, 0.05, "why", "ms", 1000.0)
    rate = Fitted("ebs_download_mbps", 157.8, ("D File",), "File onto EBS: shards", 137.0, 185.0).as_assumption()
    assert (rate.unit, rate.scale) == ("MB/s", 1.0)
    one = Fitted("startup_file", 1.0, ("B File",), "File's start-up: B", 0.5, 2.0).as_assumption()
    assert (one.unit, one.scale) == ("s", 1.0)   # 1.0 is not under 1
    assert Fitted("x", 5.0, (), "r", None, 6.0).as_assumption() is None
    assert Fitted("x", 5.0, (), "r", 4.0, None).as_assumption() is None
    # FastFile's per-file GET on every cell: A and C FastFile, (training - the script's start - the bytes at
    # min(1,000, 250 network) MB/s) x 8 readers / files, averaged.
    from dslab.core.model.calibration import measured_cells
    fitted = _fit_without()
    start = fitted["train_fixed"].value
    cells = {c.label: c for c in measured_cells()}
    each = [(cells[k].train - start - cells[k].bytes / 1e6 / 250) * 8 / cells[k].files for k in ("A FastFile",
                                                                                              "C FastFile")]
    _close(fitted["fastfile_get_latency"].value, sum(each) / 2)
    # The script's start: the compute-bound cells' training less their samples at the V100 preset's rate, averaged.
    assert fitted["train_fixed"].cells == ("A File", "A FSx", "B FastFile", "B File", "B FSx", "C File", "C FSx",
                                           "D FastFile", "D File", "D FSx")


def test_an_assumptions_value_shows_whole_from_100_one_decimal_from_1_and_two_digits_under():
    from dslab.core.model.calibration import Assumption
    a = Assumption("x", "a figure", 1.0, 100.0, "s")
    assert a.describe(100.0) == "a figure 100 (1.0-100: s)"
    assert a.describe(99.94) == "a figure 99.9 (1.0-100: s)"
    assert Assumption("x", "a figure", 0.5, 0.99, "s").describe(0.123) == "a figure 0.12 (0.5-0.99: s)"


def test_a_fold_without_c_ranges_the_per_file_constants_by_their_one_cell_and_s3s_first_byte():
    # Without C, File's per-object copy and FastFile's per-file GET each rest on A alone: their range is A's repeats
    # (File: +-17 s over 30,607 objects; FastFile's A cell has none) and S3's first byte as Mountpoint's CI spreads it
    # (its min and max over its median).
    from dslab.core.model.calibration import measured_cells, mountpoint
    fitted = _fit_without("C")
    cells = {c.label: c for c in measured_cells()}
    ttfb = mountpoint()[("standard", "time_to_first_byte_read_small_file")]
    s3_low, s3_high = ttfb["min"] / ttfb["median"], ttfb["max"] / ttfb["median"]
    a_file, a_fast = cells["A File"], cells["A FastFile"]
    fixed, ebs, start = (fitted[k].value for k in ("file_download_fixed", "ebs_download_mbps", "train_fixed"))
    per_object = (a_file.download - fixed - a_file.bytes / 1e6 / min(ebs, 250.0)) / a_file.files
    wobble = 17.0 / 30_607
    f = fitted["file_per_object"]
    _close([f.value, f.low, f.high], [per_object, (per_object - wobble) * s3_low, (per_object + wobble) * s3_high])
    assert f.why == ("rests on one cell (A File): its repeats' range, and S3's first byte varies as Mountpoint's CI "
                     "shows on EC2")
    get = (a_fast.train - start - a_fast.bytes / 1e6 / 250.0) * 8 / a_fast.files
    g = fitted["fastfile_get_latency"]
    _close([g.value, g.low, g.high], [get, get - 0.02783 * (1 - s3_low), get + 0.02783 * (s3_high - 1)])
    assert g.why == f.why.replace("A File", "A FastFile")
    assert g.rule == "FastFile's per-file GET: FastFile on JPEGs, training less start and bytes, per file and reader"
    assert f.rule == "File's per-object copy: File on JPEGs, Downloading less start and bytes, per object"
    assert fitted["fastfile_fixed"].rule == "FastFile's mount: its cells with few files, Downloading less the listing"


def test_a_calibration_files_edges_kept_records_first_small_values_and_no_error_either_way():
    from dslab.core.model.calibration import in_use_from_document
    e = _refused_calibration({"model": {}})
    assert e.problem == "mine.json is not a calibration file: write one with `dslab calibrate --results R --out FILE`"
    e = _refused_calibration(_calibration_document(calibration_version=7))
    assert e.problem == "version 7; this dslab reads 1: write it again with this dslab's `dslab calibrate`"
    # A kept record before the calibrated ones does not end the reading; a value under 1 is a value; an error of
    # none either way is an error.
    document = _calibration_document(out_of_sample={"your_runs": {"calibrated_without_it": {"under": 0.0,
                                                                                          "over": 0.0}}})
    document["constants"] = [document["constants"][2], *document["constants"][:2]]
    document["model"]["fastfile_get_latency"] = 0.05
    used = in_use_from_document(document, "mine.json")
    assert [name for name, _, _ in used.calibrated] == ["startup_file", "nvme_download_mbps"]
    assert used.model.fastfile_get_latency == 0.05 and used.error == (0.0, 0.0) and used.document is document
    e = _refused_calibration(_calibration_document(model={"startup_file": float("inf")}))
    assert e.field == "--calibration: model.startup_file"
    e = _refused_calibration(_calibration_document(out_of_sample={"your_runs": {"calibrated_without_it": {
        "under": -0.1, "over": float("inf")}}}))
    assert e.field == "--calibration: out_of_sample.your_runs.calibrated_without_it"


def test_each_fold_names_the_constants_that_rest_on_one_cell_or_none_once_its_scenario_is_out():
    from dslab.core.model.calibration import leave_one_scenario_out
    folds = {f.scenario: f for f in leave_one_scenario_out()}
    # File's start-up rests on B alone and the copy's start and EBS on B and D alone, in every fold; without A or C
    # the per-file constants (File on JPEGs, FastFile on JPEGs: A and C) rest on one cell too.
    one = ("startup_file", "file_download_fixed", "ebs_download_mbps")
    per_file = ("file_per_object", "fastfile_get_latency")
    assert {s: set(f.predictions[0].not_cross_validated) for s, f in folds.items()} == {
        "A": {*one, *per_file}, "B": set(one), "C": {*one, *per_file}, "D": set(one)}
    # Each left-out cell is predicted by the fit without it, its interval around the prediction.
    assert [p.scenario for p in folds["C"].predictions] == ["C"] * 3
    assert all(p.low <= p.predicted <= p.high for f in folds.values() for p in f.predictions)


def test_the_break_even_prices_the_fsx_it_is_given():
    from dslab.core.facts.prices import PriceTable
    from dslab.core.model.estimate import estimate_mode, fsx_express_break_even
    from dslab.core.model.provisioning import as_deployed
    from dslab.core.shape import DatasetShape
    shape, prices = DatasetShape(files=10_000, bytes=10**11), PriceTable()
    # FSx at 2,400 GiB: 2,400 x $0.14 / 730 = $0.460/h, its job on that file system.
    bigger = fsx_express_break_even(shape, max_epochs=1, prices=prices, rate=2000.0, fsx_capacity_gib=2400)
    assert bigger.assumptions[0].startswith("FSx: Scratch 2, 2,400 GiB (469 MB/s) at $0.460/h from creation")
    job = estimate_mode("FSx", shape, epochs=1, prices=prices, rate=2000.0, fsx_capacity_gib=2400)
    _close(bigger.fsx_usd[0], job.cost_usd["total"] + 2400 * 0.14 / 730 * 18.0 / 3600)
    given = fsx_express_break_even(shape, max_epochs=1, prices=prices, rate=2000.0, provisioning=as_deployed(4800))
    assert given.assumptions[0].startswith("FSx: Scratch 2, 4,800 GiB (938 MB/s) at $0.921/h from creation")


def test_a_fold_without_a_ranges_fastfiles_get_by_cs_repeats_and_no_cell_leaves_a_prior():
    from dslab.core.model.calibration import measured_cells, mountpoint
    from dslab.core.model.estimate import MODEL
    ttfb = mountpoint()[("standard", "time_to_first_byte_read_small_file")]
    s3_low, s3_high = ttfb["min"] / ttfb["median"], ttfb["max"] / ttfb["median"]
    # On every cell the GET rests on two cells: no range, no words of one cell.
    both = _fit_without()["fastfile_get_latency"]
    assert (both.low, both.high, both.why) == (None, None, "")
    # Without A it rests on C, whose repeats spread +-586.5 s: 586.5 x 8 readers / 1,530,350 files each way, with S3's
    # first byte's spread on top.
    fitted = _fit_without("A")
    c = {cell.label: cell for cell in measured_cells()}["C FastFile"]
    get = fitted["fastfile_get_latency"]
    wobble = 586.5 * 8 / 1_530_350
    _close([get.low, get.high], [get.value - wobble - 0.02783 * (1 - s3_low),
                                 get.value + wobble + 0.02783 * (s3_high - 1)])
    _close(get.value, (c.train - fitted["train_fixed"].value - c.bytes / 1e6 / 250.0) * 8 / c.files)
    assert get.why.startswith("rests on one cell (C FastFile): its repeats' range")
    # Only B and D: no File or FastFile cell on JPEGs is left: each per-file constant is its prior, ranged by S3's first
    # byte alone.
    none = _fit_without("A", "C")
    per_object, fast = none["file_per_object"], none["fastfile_get_latency"]
    assert (per_object.value, per_object.cells) == (MODEL.file_per_object, ())
    _close([per_object.low, per_object.high], [MODEL.file_per_object * s3_low, MODEL.file_per_object * s3_high])
    assert per_object.why == "no cell left: a prior, and S3's first byte varies as Mountpoint's CI shows on EC2"
    _close([fast.low, fast.high], [MODEL.fastfile_get_latency - 0.02783 * (1 - s3_low),
                                   MODEL.fastfile_get_latency + 0.02783 * (s3_high - 1)])
    assert _fit_without()["startup_file"].rule == ("File's start-up: File cells with a short download, Downloading + "
                                                   "other")
    assert _fit_without()["train_fixed"].rule == ("the script's start: compute-bound cells' training less samples at "
                                                  "the preset's rate")
