"""The source post's decision flowchart (dslab/core/answer/answer.py ``flowchart``), shown beside the pick, on datasets
at each of its thresholds (issue 58): small under 75 GB ("small (under 50-100 GB)"), small files up to 1 MB,
shards under 50 MB, large files from 50 MB ("50 MB and up"), and what random reads, data in EFS and a portable script
decide first."""

from __future__ import annotations

from dslab.core.answer.answer import PORTABLE_REASON, flowchart
from dslab.core.shape import DatasetShape

GB = 10 ** 9


def shape(total: float, files: int) -> DatasetShape:
    return DatasetShape(files=files, bytes=int(total))


def test_a_small_dataset_goes_to_file_mode_and_small_files_into_shards():
    # 1.1 GB in 30,607 files: mean 35.9 KB.
    assert flowchart(shape(1.1 * GB, 30_607)) == (
        ["small dataset (1.1 GB < 75 GB) -> File mode", "small files (mean 36 KB < 50 MB) -> serialize them into shards"],
        "File")
    # 40 MB is said in MB, not "0.0 GB"; files of exactly 1 MB are still small files (said in MB from 1 MB).
    assert flowchart(shape(40e6, 40)) == (
        ["small dataset (40.0 MB < 75 GB) -> File mode", "small files (mean 1.0 MB < 50 MB) -> serialize them into shards"],
        "File")
    # From 100 MB the size is said in GB (0.1 GB); a mean under 1 MB in KB of 1,000 bytes: 900,300 B is "900 KB".
    assert flowchart(shape(1e8, 100))[0][0] == "small dataset (0.1 GB < 75 GB) -> File mode"
    assert flowchart(shape(900.3e6, 1000))[0] == [
        "small dataset (0.9 GB < 75 GB) -> File mode", "small files (mean 900 KB < 50 MB) -> serialize them into shards"]
    # Shards of 10 MB: already shards, smaller than the ~150 MB the post finds best.
    assert flowchart(shape(10 * GB, 1000)) == (
        ["small dataset (10.0 GB < 75 GB) -> File mode",
         "files of 10.0 MB are shards already; the post finds ~150 MB and up read best"], "File")
    # Files of 50 MB and up: nothing more to say.
    assert flowchart(shape(10 * GB, 200)) == (["small dataset (10.0 GB < 75 GB) -> File mode"], "File")
    # 74.9 GB is small; 75 GB is not.
    assert flowchart(shape(74.9 * GB, 100))[1] == "File"
    assert flowchart(shape(75 * GB, 100))[1] == "FastFile"


def test_a_large_dataset_goes_by_its_files_size():
    # 2 TB of 200 MB files: FastFile.
    assert flowchart(shape(2000 * GB, 10_000)) == (
        ["large dataset (2,000 GB) of large files (mean 200.0 MB) -> FastFile"], "FastFile")
    # Exactly 50 MB a file is large.
    assert flowchart(shape(100 * GB, 2000))[1] == "FastFile"
    # 20 MB shards: FSx, or bigger shards for FastFile.
    assert flowchart(shape(100 * GB, 5000)) == (
        ["large dataset (100 GB) of files of 20.0 MB (under 50 MB) -> FSx for Lustre, or shards of ~150 MB and up for "
         "FastFile"], "FSx")
    # 540 GB in 1.53 M files (353 KB each): FSx unless packed.
    assert flowchart(shape(540 * GB, 1_530_350)) == (
        ["large dataset (540 GB) of small files (mean 353 KB) -> FSx for Lustre, unless the files can be packed into "
         "large shards"], "FSx")
    # Files of exactly 1 MB are small files here too.
    assert flowchart(shape(100 * GB, 100_000))[0][0].endswith("of small files (mean 1.0 MB) -> FSx for Lustre, unless "
                                                              "the files can be packed into large shards")


def test_what_the_question_decides_before_the_size():
    big = shape(2000 * GB, 10_000)
    assert flowchart(big, random_access=True) == (
        ["random reads -> a file system built for them: FSx for Lustre"], "FSx")
    assert flowchart(big, data_in_efs=True) == (["the data already lives in EFS -> read it there"], "EFS")
    assert flowchart(big, data_in_efs=True, random_access=True)[1] == "EFS"
    assert flowchart(big, portable=True) == ([PORTABLE_REASON], "Script")
    assert flowchart(big, portable=True, data_in_efs=True)[1] == "EFS"   # the data lives in EFS: it stays there
    assert flowchart(big, portable=True, random_access=True)[1] == "Script"
    assert PORTABLE_REASON.startswith("the data must stay where it is, or one script must run unchanged on SageMaker, "
                                      "EC2 and EKS -> the script reads S3 itself")
