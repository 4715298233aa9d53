"""Every field the product reads from an AWS response of SageMaker, FSx, EFS, DataSync and Step Functions: the API
reference's own words for it, its page, where the product reads it and what it does with it.

The product reads each field as its reference defines it, never as the lab's own stand-in happens to write it (issue
54: BillableTimeInSeconds is one instance's wall clock, and was read as every instance's). docs/reference/aws-fields.md
is generated from this table (``python -m dslab.core.facts.aws_fields --write``); tests/test_aws_fields.py checks:

- each quote word for word against the API documentation in botocore's service models (the text the API reference is
  generated from), for the botocore the project pins;
- each module named as reading a field does read it, and every response field a reader module reads is in the table
  (``READERS``; ``NOT_FROM_A_RESPONSE`` names the look-alikes, a request's or a template's keys);
- for the fields a figure rests on (``rule``), the stand-in writes them and the product reads them as the quote says.

S3 listings and objects, CloudFormation stacks, SSM parameters and Service Quotas are read as plain values and are not
listed here.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

SERVICES = {   # botocore's service name: the service's name and where its API reference's pages are
    "sagemaker": ("Amazon SageMaker", "https://docs.aws.amazon.com/sagemaker/latest/APIReference/"),
    "fsx": ("Amazon FSx", "https://docs.aws.amazon.com/fsx/latest/APIReference/"),
    "efs": ("Amazon EFS", "https://docs.aws.amazon.com/efs/latest/ug/"),
    "datasync": ("AWS DataSync", "https://docs.aws.amazon.com/datasync/latest/userguide/"),
    "stepfunctions": ("AWS Step Functions", "https://docs.aws.amazon.com/step-functions/latest/apireference/"),
}


@dataclass(frozen=True)
class AwsField:
    service: str                 # botocore's service name
    operation: str               # the operation whose response holds it
    shape: str                   # the structure it is a member of, as botocore (and the API reference) names it
    member: str
    quote: str                   # the API reference's own words (botocore's documentation of the member)
    read_in: tuple[str, ...]     # the modules that read it (none: listed so that it is known not to be)
    use: str                     # what the product does with it
    rule: str = ""               # the behaviour tests/test_aws_fields.py holds the stand-in and the product to

    @property
    def page(self) -> str:
        """The API reference page that defines it: the operation's for a member of its response, else the type's."""
        top = self.shape.endswith(("Response", "Output"))
        return f"{SERVICES[self.service][1]}API_{self.operation if top else self.shape}.html"

    @property
    def name(self) -> str:
        return f"{self.shape}.{self.member}"


SM, DTJ = "sagemaker", "DescribeTrainingJob"
DTJR = "DescribeTrainingJobResponse"
RESULTS, COLLECT = "dslab/core/results.py", "dslab/workflow/collect.py"
RUNS, JOBS = "dslab/cli/runs.py", "dslab/cli/jobs.py"
GUARD, FSX_DATA = "dslab/workflow/fsx_guard.py", "dslab/workflow/fsx_data.py"
COMMON, PLAN = "dslab/workflow/common.py", "dslab/workflow/plan.py"
CHECK_FSX, TEARDOWN, CLI_FSX = "dslab/workflow/check_fsx_data.py", "dslab/workflow/teardown.py", "dslab/cli/fsx.py"
DOCTOR = "dslab/aws/doctor.py"
DEPLOY_CHECK, DEPLOY_GUARD = "dslab/cli/deploy_check.py", "dslab/core/deploy_guard.py"
AWS_EFS, CLI_EFS, MODEL_EFS = "dslab/aws/efs.py", "dslab/cli/efs.py", "dslab/core/model/efs.py"

FIELDS: tuple[AwsField, ...] = (
    # ---- SageMaker DescribeTrainingJob: what a job cost and how its time was spent --------------------------------
    AwsField(SM, DTJ, DTJR, "BillableTimeInSeconds",
             "Billable time refers to the absolute wall-clock time. Multiply BillableTimeInSeconds by the number of "
             "instances (InstanceCount) in your training cluster to get the total compute time SageMaker bills you if "
             "you run distributed training. The formula is as follows: BillableTimeInSeconds * InstanceCount. You can "
             "calculate the savings from using managed spot training using the formula (1 - BillableTimeInSeconds / "
             "TrainingTimeInSeconds) * 100.",
             (RESULTS, RUNS),
             "One instance's seconds, as they come: the record's billable_seconds. The instances cost billable x "
             "InstanceCount x the hourly price (prices.job_cost); `dslab status` prices a job the same way; spot's "
             "saving is 1 - billable / training time (results.spot_saving).", rule="billable-per-instance"),
    AwsField(SM, DTJ, DTJR, "TrainingTimeInSeconds", "The training time in seconds.", (RESULTS,),
             "One instance's wall clock: the record's training_time_seconds, the wall the phases split (breakdown's "
             "other is the rest of it) and the denominator of spot's saving.", rule="training-time"),
    AwsField(SM, DTJ, DTJR, "TrainingStartTime",
             "Indicates the time when the training job starts on training instances. You are billed for the time "
             "interval between this time and the value of TrainingEndTime.",
             (RESULTS, RUNS),
             "The record's training_start (the date a calibration names); `dslab status` prices a running job from it "
             "to now on each instance.", rule="billed-interval"),
    AwsField(SM, DTJ, DTJR, "TrainingEndTime",
             "You are billed for the time interval between the value of TrainingStartTime and this time. For "
             "successful jobs and stopped jobs, this is the time after model artifacts are uploaded. For failed jobs, "
             "this is the time when SageMaker detects a job failure.",
             (RESULTS,), "Ends a transition that has no EndTime of its own.", rule="billed-interval"),
    AwsField(SM, DTJ, DTJR, "SecondaryStatusTransitions",
             "A history of all of the secondary statuses that the training job has transitioned through.", (RESULTS,),
             "The phases: seconds per secondary status, one instance's wall clock, never scaled by the instance count "
             "nor squeezed to a spot job's billable time.", rule="transitions-wall"),
    AwsField(SM, DTJ, "SecondaryStatusTransition", "Status",
             "Contains a secondary status information from a training job.", (RESULTS,),
             "Names each phase (Starting, Downloading, Training, Uploading, ...).", rule="transitions-wall"),
    AwsField(SM, DTJ, "SecondaryStatusTransition", "StartTime",
             "A timestamp that shows when the training job transitioned to the current secondary status state.",
             (RESULTS,), "A phase's start.", rule="transitions-wall"),
    AwsField(SM, DTJ, "SecondaryStatusTransition", "EndTime",
             "A timestamp that shows when the training job transitioned out of this secondary status state into "
             "another secondary status state or when the training job has ended.", (RESULTS,),
             "A phase's end (the last, open one ends at TrainingEndTime, else LastModifiedTime).",
             rule="transitions-wall"),
    AwsField(SM, DTJ, "SecondaryStatusTransition", "StatusMessage",
             "Status messages are subject to change. Therefore, we recommend not including them in code that "
             "programmatically initiates actions.", (RESULTS,),
             "Recorded beside its transition (the record's transitions) and never acted on, as the reference asks. A "
             "calibration reads the image pull from it: the reference's own example, Training with \"Downloading the "
             "training image\", is the first part of Training, and is start-up, not training (core/measured.py). The "
             "stand-in writes the reference's own messages.", rule="status-message"),
    AwsField(SM, DTJ, DTJR, "WarmPoolStatus", "The status of the warm pool associated with the training job.",
             (RESULTS,),
             "The record's warm_pool. The lab's requests set no KeepAlivePeriodInSeconds, so its own jobs keep no pool "
             "and nothing is billed for one.", rule="warm-pool"),
    AwsField(SM, DTJ, "WarmPoolStatus", "Status", "The status of the warm pool.", (RESULTS,),
             "warm_pool.status: Reused means another job started on this job's instances.", rule="warm-pool"),
    AwsField(SM, DTJ, "WarmPoolStatus", "ReusedByJob",
             "The name of the matching training job that reused the warm pool.", (RESULTS,),
             "warm_pool.reused_by_job: that job started warm (no instances launched, no image pulled), so a "
             "calibration does not fit its start-up (core/measured.py).", rule="warm-pool"),
    AwsField(SM, DTJ, "WarmPoolStatus", "ResourceRetainedBillableTimeInSeconds",
             "Multiply ResourceRetainedBillableTimeInSeconds by the number of instances (InstanceCount) in your "
             "training cluster to get the total compute time SageMaker bills you if you run warm pool training.", (),
             "Not read (the lab keeps no pool); were one kept, its retained time is one instance's too.",
             rule="warm-pool"),
    AwsField(SM, DTJ, DTJR, "TrainingJobName", "Name of the model training job.", (RESULTS, COLLECT, JOBS),
             "The record's job_name."),
    AwsField(SM, DTJ, DTJR, "TrainingJobStatus", "The status of the training job.", (RESULTS, COLLECT, RUNS, JOBS),
             "The record's status (Stopping read as Stopped); Collect takes a job only once it ended."),
    AwsField(SM, DTJ, DTJR, "SecondaryStatus",
             "Provides detailed information about the state of the training job.", (RUNS,),
             "The phase `dslab status` shows for each job."),
    AwsField(SM, DTJ, DTJR, "FailureReason", "If the training job failed, the reason it failed.",
             (RESULTS, COLLECT, JOBS), "The record's failure_reason, shown as SageMaker words it."),
    AwsField(SM, DTJ, DTJR, "CreationTime", "A timestamp that indicates when the training job was created.",
             (RESULTS,), "training_start where TrainingStartTime is absent (a job that never started)."),
    AwsField(SM, DTJ, DTJR, "LastModifiedTime",
             "A timestamp that indicates when the status of the training job was last modified.", (RESULTS,),
             "Ends an open transition where TrainingEndTime is absent."),
    AwsField(SM, DTJ, DTJR, "ResourceConfig",
             "Resources, including ML compute instances and ML storage volumes, that are configured for model "
             "training.", (RESULTS, COLLECT, RUNS), "The instances and volume the job ran on."),
    AwsField(SM, DTJ, "ResourceConfig", "InstanceCount",
             "The number of ML compute instances to use. For distributed training, provide a value greater than 1.",
             (RESULTS, COLLECT, RUNS),
             "The record's instance_count: what billable seconds are multiplied by to price the instances.",
             rule="billable-per-instance"),
    AwsField(SM, DTJ, "ResourceConfig", "InstanceType", "The ML compute instance type.", (RESULTS, RUNS),
             "The hourly price the instances are billed at."),
    AwsField(SM, DTJ, "ResourceConfig", "VolumeSizeInGB",
             "The size of the ML storage volume that you want to provision.", (RESULTS,),
             "Each instance's EBS volume, priced for the training time (none on NVMe types)."),
    AwsField(SM, DTJ, DTJR, "HyperParameters", "Algorithm-specific parameters.", (RESULTS,),
             "The epochs and the dataset URI a script read (no channel)."),
    AwsField(SM, DTJ, DTJR, "AlgorithmSpecification",
             "Information about the algorithm used for training, and algorithm metadata.", (RESULTS,),
             "Its TrainingInputMode."),
    AwsField(SM, DTJ, "AlgorithmSpecification", "TrainingInputMode",
             "The training input mode that the algorithm supports.", (RESULTS,),
             "The mode of a channel that names none."),
    AwsField(SM, DTJ, DTJR, "InputDataConfig",
             "An array of Channel objects that describes each data input channel.", (RESULTS, GUARD),
             "The record's mode and dataset; the idle guard's jobs reading FSx."),
    AwsField(SM, DTJ, "Channel", "DataSource", "The location of the channel data.", (RESULTS, GUARD),
             "S3 or a file system."),
    AwsField(SM, DTJ, "Channel", "InputMode",
             "(Optional) The input mode to use for the data channel in a training job. If you don't set a value for "
             "InputMode, SageMaker uses the value set for TrainingInputMode.", (RESULTS,), "The record's mode."),
    AwsField(SM, DTJ, "DataSource", "S3DataSource",
             "The S3 location of the data source that is associated with a channel.", (RESULTS,),
             "An S3 channel: its URI and distribution."),
    AwsField(SM, DTJ, "DataSource", "FileSystemDataSource", "The file system that is associated with a channel.",
             (RESULTS, GUARD), "An FSx or EFS channel."),
    AwsField(SM, DTJ, "S3DataSource", "S3Uri",
             "Depending on the value specified for the S3DataType, identifies either a key name prefix or a manifest.",
             (RESULTS,), "The dataset's name (the prefix's last part) and bucket (Express or Standard)."),
    AwsField(SM, DTJ, "S3DataSource", "S3DataDistributionType",
             "If you want SageMaker to replicate the entire dataset on each ML compute instance that is launched for "
             "model training, specify FullyReplicated.", (RESULTS,),
             "The record's distribution (a replicated sweep is marked in the report's scaling table)."),
    AwsField(SM, DTJ, "FileSystemDataSource", "FileSystemType", "The file system type.", (RESULTS,),
             "FSx or EFS mode."),
    AwsField(SM, DTJ, "FileSystemDataSource", "DirectoryPath",
             "The full path to the directory to associate with the channel.", (RESULTS,), "The dataset's name."),
    AwsField(SM, DTJ, "FileSystemDataSource", "FileSystemId", "The file system id.", (GUARD,),
             "Whether a running job reads the FSx the idle guard would delete."),
    AwsField(SM, DTJ, DTJR, "OutputDataConfig",
             "The S3 path where model artifacts that you configured when creating the job are stored.", (COLLECT,),
             "Where Collect finds the job's output archive (its metrics files)."),
    AwsField(SM, DTJ, "OutputDataConfig", "S3OutputPath",
             "Identifies the S3 path where you want SageMaker to store the model artifacts.", (COLLECT,),
             "The archive's key: <path>/<job>/output/output.tar.gz."),
    AwsField(SM, DTJ, DTJR, "CheckpointConfig",
             "Contains information about the output location for managed spot training checkpoint data.", (RESULTS,),
             "A checkpoint trial's synced URI."),
    AwsField(SM, DTJ, "CheckpointConfig", "S3Uri",
             "Identifies the S3 path where you want SageMaker to store checkpoints.", (RESULTS,),
             "The record's checkpoint_s3_uri."),
    AwsField(SM, DTJ, DTJR, "FinalMetricDataList",
             "A collection of MetricData objects that specify the names, values, and dates and times that the "
             "training algorithm emitted to Amazon CloudWatch.", (RESULTS,),
             "The metrics where the script's metrics.json is not there; the user's own metric definitions' values."),
    AwsField(SM, DTJ, "MetricData", "MetricName", "The name of the metric.", (RESULTS,), "Which metric."),
    AwsField(SM, DTJ, "MetricData", "Value", "The value of the metric.", (RESULTS,), "Its final value."),
    AwsField(SM, "ListTrainingJobs", "ListTrainingJobsResponse", "TrainingJobSummaries",
             "An array of TrainingJobSummary objects, each listing a training job.", (GUARD,),
             "The InProgress jobs the idle guard looks at."),
    AwsField(SM, "ListTrainingJobs", "TrainingJobSummary", "TrainingJobName",
             "The name of the training job that you want a summary for.", (GUARD,), "Each one, described."),

    # ---- Amazon FSx: the file system, its link to S3, its imports ------------------------------------------------
    AwsField("fsx", "DescribeFileSystems", "DescribeFileSystemsResponse", "FileSystems",
             "An array of file system descriptions.", (COMMON, FSX_DATA, PLAN, CLI_FSX, DEPLOY_CHECK),
             "The one file system asked for."),
    AwsField("fsx", "DescribeFileSystems", "FileSystem", "Lifecycle",
             "The lifecycle status of the file system.", (COMMON, FSX_DATA),
             "AVAILABLE or UPDATING: jobs may read it; FAILED, DELETING, MISCONFIGURED: FSx jobs are skipped, saying "
             "so; anything else is waited for."),
    AwsField("fsx", "DescribeFileSystems", "FileSystem", "LustreConfiguration",
             "The configuration for the Amazon FSx for Lustre file system.", (FSX_DATA, PLAN, DEPLOY_GUARD),
             "Its deployment type, throughput and legacy S3 link; in an update's TargetFileSystemValues, the tier "
             "asked."),
    AwsField("fsx", "DescribeFileSystems", "FileSystem", "StorageCapacity",
             "The storage capacity of the file system in gibibytes (GiB).", (PLAN, DEPLOY_GUARD),
             "The capacity the run's FSx is priced at (the lab a report prices); in an update's "
             "TargetFileSystemValues, a capacity increase."),
    AwsField("fsx", "DescribeFileSystems", "FileSystem", "CreationTime",
             "The time that the file system was created, in seconds (since 1970-01-01T00:00:00Z), also known as Unix "
             "time.", (FSX_DATA,),
             "When a legacy ImportPath link was made (datasets written after it need an import)."),
    AwsField("fsx", "DescribeFileSystems", "FileSystem", "SubnetIds",
             "Specifies the IDs of the subnets that the file system is accessible from.", (CLI_FSX,),
             "The zone FSx stands in (`dslab fsx` moves it with the lab)."),
    AwsField("fsx", "DescribeFileSystems", "FileSystem", "AdministrativeActions",
             "A list of administrative actions for the file system that are in process or waiting to be processed.",
             (PLAN, DEPLOY_CHECK), "Its capacity increases and the storage optimization after each."),
    AwsField("fsx", "DescribeFileSystems", "LustreFileSystemConfiguration", "DeploymentType",
             "The deployment type of the FSx for Lustre file system.", (PLAN,), "Prices the run's FSx."),
    AwsField("fsx", "DescribeFileSystems", "LustreFileSystemConfiguration", "PerUnitStorageThroughput",
             "Per unit storage throughput represents the megabytes per second of read or write throughput per 1 "
             "tebibyte of storage provisioned.", (PLAN, DEPLOY_GUARD),
             "Prices a Persistent 2 file system's throughput tier; in an update's TargetFileSystemValues, a tier "
             "change (Plan marks a run that starts before it completes; deploy-check holds a further one)."),
    AwsField("fsx", "DescribeFileSystems", "LustreFileSystemConfiguration", "DataRepositoryConfiguration",
             "The data repository configuration object for Lustre file systems returned in the response of the "
             "CreateFileSystem operation.", (FSX_DATA,), "The legacy S3 link (ImportPath), where no association is."),
    AwsField("fsx", "DescribeFileSystems", "DataRepositoryConfiguration", "Lifecycle",
             "Describes the state of the file system's S3 durable data repository, if it is configured with an S3 "
             "repository.", (FSX_DATA,), "The legacy link imports while CREATING; FAILED or MISCONFIGURED stops."),
    AwsField("fsx", "DescribeFileSystems", "DataRepositoryConfiguration", "ImportPath",
             "The import path to the Amazon S3 bucket (and optional prefix) that you're using as the data repository "
             "for your FSx for Lustre file system", (FSX_DATA,), "The S3 path the legacy link imports."),
    AwsField("fsx", "DescribeFileSystems", "AdministrativeAction", "AdministrativeActionType",
             "Describes the type of administrative action", (PLAN, DEPLOY_GUARD),
             "FILE_SYSTEM_UPDATE (a capacity increase or a tier change) and STORAGE_OPTIMIZATION."),
    AwsField("fsx", "DescribeFileSystems", "AdministrativeAction", "RequestTime",
             "The time that the administrative action request was received.", (PLAN, DEPLOY_GUARD),
             "When capacity last grew: no further increase for 6 hours."),
    AwsField("fsx", "DescribeFileSystems", "AdministrativeAction", "Status",
             "The status of the administrative action", (PLAN, DEPLOY_GUARD),
             "An optimization still running marks the run's FSx results and holds a further increase."),
    AwsField("fsx", "DescribeFileSystems", "AdministrativeAction", "ProgressPercent",
             "The percentage-complete status of a STORAGE_OPTIMIZATION or DOWNLOAD_DATA_FROM_BACKUP administrative "
             "action.", (PLAN, DEPLOY_GUARD), "Said with the mark."),
    AwsField("fsx", "DescribeFileSystems", "AdministrativeAction", "TargetFileSystemValues",
             "The target value for the administration action, provided in the UpdateFileSystem operation.",
             (PLAN, DEPLOY_GUARD),
             "Whether an update was a capacity increase (its StorageCapacity) or a tier change (its "
             "PerUnitStorageThroughput)."),
    AwsField("fsx", "DescribeDataRepositoryAssociations", "DescribeDataRepositoryAssociationsResponse",
             "Associations", "An array of one or more data repository association descriptions.", (FSX_DATA,),
             "The file system's links to S3."),
    AwsField("fsx", "DescribeDataRepositoryAssociations", "DescribeDataRepositoryAssociationsResponse", "NextToken",
             "If present, this token indicates from what point you can continue processing the request, where the "
             "previous NextToken value left off.", (FSX_DATA,), "Every page of associations and tasks is read."),
    AwsField("fsx", "DescribeDataRepositoryAssociations", "DataRepositoryAssociation", "AssociationId",
             "The system-generated, unique ID of the data repository association.", (FSX_DATA,), "Named in a reason."),
    AwsField("fsx", "DescribeDataRepositoryAssociations", "DataRepositoryAssociation", "Lifecycle",
             "Describes the state of a data repository association.", (FSX_DATA,),
             "CREATING or UPDATING is waited for; FAILED or MISCONFIGURED stops, with its message."),
    AwsField("fsx", "DescribeDataRepositoryAssociations", "DataRepositoryAssociation", "FileSystemPath",
             "A path on the Amazon FSx for Lustre file system that points to a high-level directory (such as /ns1/) "
             "or subdirectory (such as /ns1/subdir/) that will be mapped 1-1 with DataRepositoryPath.", (FSX_DATA,),
             "Which link covers a dataset's directory."),
    AwsField("fsx", "DescribeDataRepositoryAssociations", "DataRepositoryAssociation", "DataRepositoryPath",
             "The path to the data repository that will be linked to the cache or file system.", (FSX_DATA,),
             "The S3 path a dataset's import names."),
    AwsField("fsx", "DescribeDataRepositoryAssociations", "DataRepositoryAssociation", "BatchImportMetaDataOnCreate",
             "A boolean flag indicating whether an import data repository task to import metadata should run after "
             "the data repository association is created.", (FSX_DATA,),
             "A new link's first import is waited for before it appears."),
    AwsField("fsx", "DescribeDataRepositoryAssociations", "DataRepositoryAssociation", "CreationTime",
             "The time that the resource was created, in seconds (since 1970-01-01T00:00:00Z), also known as Unix "
             "time.", (FSX_DATA,), "Datasets written after it need an import of their own."),
    AwsField("fsx", "DescribeDataRepositoryAssociations", "DataRepositoryAssociation", "FailureDetails",
             "Provides detailed information about the data repository if its Lifecycle is set to MISCONFIGURED or "
             "FAILED.", (FSX_DATA,), "Its message, in the reason."),
    AwsField("fsx", "DescribeDataRepositoryAssociations", "DataRepositoryFailureDetails", "Message",
             "A detailed error message.", (FSX_DATA,), "Said as it is."),
    AwsField("fsx", "DescribeDataRepositoryTasks", "DescribeDataRepositoryTasksResponse", "DataRepositoryTasks",
             "The collection of data repository task descriptions returned.", (FSX_DATA,), "The S3 imports."),
    AwsField("fsx", "CreateDataRepositoryTask", "CreateDataRepositoryTaskResponse", "DataRepositoryTask",
             "The description of the data repository task that you just created.", (CHECK_FSX,),
             "The import just started: never ready on the check that started it."),
    AwsField("fsx", "DescribeDataRepositoryTasks", "DataRepositoryTask", "TaskId",
             "The system-generated, unique 17-digit ID of the data repository task.", (FSX_DATA, CHECK_FSX),
             "Named in a reason."),
    AwsField("fsx", "DescribeDataRepositoryTasks", "DataRepositoryTask", "Type",
             "The type of data repository task.", (FSX_DATA,), "Only IMPORT_METADATA_FROM_REPOSITORY tasks count."),
    AwsField("fsx", "DescribeDataRepositoryTasks", "DataRepositoryTask", "Lifecycle",
             "The lifecycle status of the data repository task", (FSX_DATA,),
             "PENDING or EXECUTING is waited for; FAILED or CANCELED with nothing imported stops."),
    AwsField("fsx", "DescribeDataRepositoryTasks", "DataRepositoryTask", "Paths",
             "An array of paths that specify the data for the data repository task to process.", (FSX_DATA,),
             "Which datasets an import covers (none: the whole file system)."),
    AwsField("fsx", "DescribeDataRepositoryTasks", "DataRepositoryTask", "Status",
             "Provides the status of the number of files that the task has processed successfully and failed to "
             "process.", (FSX_DATA,), "The import's progress."),
    AwsField("fsx", "DescribeDataRepositoryTasks", "DataRepositoryTask", "CreationTime",
             "The time that the resource was created, in seconds (since 1970-01-01T00:00:00Z), also known as Unix "
             "time.", (FSX_DATA,), "Whether an import is recent enough to count."),
    AwsField("fsx", "DescribeDataRepositoryTasks", "DataRepositoryTask", "EndTime",
             "The time the system completed processing the task, populated after the task is complete.", (FSX_DATA,),
             "The latest finished import decides."),
    AwsField("fsx", "DescribeDataRepositoryTasks", "DataRepositoryTask", "FailureDetails",
             "Failure message describing why the task failed, it is populated only when Lifecycle is set to FAILED.",
             (FSX_DATA,), "Its message, in the reason."),
    AwsField("fsx", "DescribeDataRepositoryTasks", "DataRepositoryTaskFailureDetails", "Message",
             "A detailed error message.", (FSX_DATA,), "Said as it is."),
    AwsField("fsx", "DescribeDataRepositoryTasks", "DataRepositoryTask", "Report",
             "Provides a report detailing the data repository task results of the files processed that match the "
             "criteria specified in the report Scope parameter.", (FSX_DATA,), "Where its report is, in the reason."),
    AwsField("fsx", "DescribeDataRepositoryTasks", "CompletionReport", "Path",
             "Specifies the location of the report on the file system's linked S3 data repository.", (FSX_DATA,),
             "Said."),
    AwsField("fsx", "DescribeDataRepositoryTasks", "DataRepositoryTaskStatus", "TotalCount",
             "The total number of files that the task will process. While a task is executing, the sum of "
             "SucceededCount plus FailedCount may not equal TotalCount. When the task is complete, TotalCount equals "
             "the sum of SucceededCount plus FailedCount.", (FSX_DATA,),
             "Progress: done (succeeded + failed) of total."),
    AwsField("fsx", "DescribeDataRepositoryTasks", "DataRepositoryTaskStatus", "SucceededCount",
             "A running total of the number of files that the task has successfully processed.", (FSX_DATA,),
             "Objects imported."),
    AwsField("fsx", "DescribeDataRepositoryTasks", "DataRepositoryTaskStatus", "FailedCount",
             "A running total of the number of files that the task failed to process.", (FSX_DATA,),
             "Objects not imported: said, and the FSx jobs read the rest."),

    # ---- Amazon EFS --------------------------------------------------------------------------------------------
    AwsField("efs", "DescribeFileSystems", "DescribeFileSystemsResponse", "FileSystems",
             "An array of file system descriptions.", (AWS_EFS,), "The lab's file system."),
    AwsField("efs", "DescribeFileSystems", "FileSystemDescription", "SizeInBytes",
             "The latest known metered size (in bytes) of data stored in the file system, in its Value field, and the "
             "time at which that size was determined in its Timestamp field.", (AWS_EFS,),
             "What `dslab efs` says it holds and costs a month."),
    AwsField("efs", "DescribeFileSystems", "FileSystemDescription", "ThroughputMode",
             "Displays the file system's throughput mode.", (AWS_EFS,), "Said with the usage."),
    AwsField("efs", "DescribeFileSystems", "FileSystemSize", "Value",
             "The latest known metered size (in bytes) of data stored in the file system.",
             (AWS_EFS, CLI_EFS, MODEL_EFS), "The total priced."),
    AwsField("efs", "DescribeFileSystems", "FileSystemSize", "ValueInIA",
             "The latest known metered size (in bytes) of data stored in the Infrequent Access storage class.",
             (AWS_EFS, MODEL_EFS), "Priced at Infrequent Access."),
    AwsField("efs", "DescribeFileSystems", "FileSystemSize", "ValueInStandard",
             "The latest known metered size (in bytes) of data stored in the Standard storage class.", (MODEL_EFS,),
             "Priced at Standard."),
    AwsField("efs", "DescribeFileSystems", "FileSystemSize", "ValueInArchive",
             "The latest known metered size (in bytes) of data stored in the Archive storage class.", (MODEL_EFS,),
             "Counted as Standard (the lab offers no Elastic throughput, which Archive needs)."),
    AwsField("efs", "DescribeLifecycleConfiguration", "LifecycleConfigurationDescription", "LifecyclePolicies",
             "An array of lifecycle management policies. EFS supports a maximum of one policy per file system.",
             (AWS_EFS,), "The file system's lifecycle, said with its usage."),
    AwsField("efs", "DescribeLifecycleConfiguration", "LifecyclePolicy", "TransitionToIA",
             "The number of days after files were last accessed in primary storage (the Standard storage class) at "
             "which to move them to Infrequent Access (IA) storage.", (AWS_EFS,), "Said."),
    AwsField("efs", "DescribeLifecycleConfiguration", "LifecyclePolicy", "TransitionToPrimaryStorageClass",
             "Whether to move files back to primary (Standard) storage after they are accessed in IA or Archive "
             "storage.", (AWS_EFS,), "Said."),

    # ---- AWS DataSync: emptying EFS ----------------------------------------------------------------------------
    AwsField("datasync", "DescribeTask", "DescribeTaskResponse", "Status",
             "The status of your task.", (AWS_EFS,), "A busy task's current execution is followed, not a new one."),
    AwsField("datasync", "DescribeTask", "DescribeTaskResponse", "CurrentTaskExecutionArn",
             "The ARN of the most recent task execution.", (AWS_EFS,), "The execution followed."),
    AwsField("datasync", "StartTaskExecution", "StartTaskExecutionResponse", "TaskExecutionArn",
             "The ARN of the running task execution.", (AWS_EFS,), "The execution followed."),
    AwsField("datasync", "DescribeTaskExecution", "DescribeTaskExecutionResponse", "Status",
             "The status of the task execution.", (AWS_EFS, CLI_EFS), "Followed until it ends; SUCCESS is success."),
    AwsField("datasync", "DescribeTaskExecution", "DescribeTaskExecutionResponse", "Result",
             "The result of the task execution.", (CLI_EFS,), "Its error, where it failed."),
    AwsField("datasync", "DescribeTaskExecution", "TaskExecutionResultDetail", "ErrorCode",
             "An error that DataSync encountered during your task execution.", (CLI_EFS,), "Said."),
    AwsField("datasync", "DescribeTaskExecution", "TaskExecutionResultDetail", "ErrorDetail",
             "The detailed description of an error that DataSync encountered during your task execution.", (CLI_EFS,),
             "Said."),
    AwsField("datasync", "DescribeTaskExecution", "DescribeTaskExecutionResponse", "FilesDeleted",
             "The number of files, objects, and directories that DataSync actually deletes in your destination "
             "location.", (AWS_EFS,), "How much `dslab efs empty` deleted."),

    # ---- AWS Step Functions: the workflow's executions ---------------------------------------------------------
    AwsField("stepfunctions", "StartExecution", "StartExecutionOutput", "executionArn",
             "The Amazon Resource Name (ARN) that identifies the execution.", (RUNS,), "The execution `dslab run` "
             "started, followed."),
    AwsField("stepfunctions", "DescribeExecution", "DescribeExecutionOutput", "status",
             "The current status of the execution.", (RUNS,), "RUNNING, or how it ended."),
    AwsField("stepfunctions", "DescribeExecution", "DescribeExecutionOutput", "startDate",
             "The date the execution is started.", (RUNS,), "Its elapsed time."),
    AwsField("stepfunctions", "DescribeExecution", "DescribeExecutionOutput", "stopDate",
             "If the execution ended, the date the execution stopped.", (RUNS,), "Its elapsed time, once ended."),
    AwsField("stepfunctions", "DescribeExecution", "DescribeExecutionOutput", "error",
             "The error string if the state machine execution failed.", (RUNS,), "Said with its cause."),
    AwsField("stepfunctions", "DescribeExecution", "DescribeExecutionOutput", "cause",
             "The cause string if the state machine execution failed.", (RUNS,), "Said."),
    AwsField("stepfunctions", "DescribeExecution", "DescribeExecutionOutput", "name",
             "The name of the execution.", (RUNS,), "Its results folder, results/<name>/."),
    AwsField("stepfunctions", "ListExecutions", "ListExecutionsOutput", "executions",
             "The list of matching executions.", (RUNS, GUARD, PLAN, TEARDOWN),
             "The newest execution; the running ones (the idle guard keeps FSx while one runs)."),
    AwsField("stepfunctions", "ListExecutions", "ExecutionListItem", "name",
             "The name of the execution.", (GUARD, PLAN, TEARDOWN), "Whose plan.json says what it reads."),
    AwsField("stepfunctions", "ListExecutions", "ExecutionListItem", "executionArn",
             "The Amazon Resource Name (ARN) that identifies the execution.", (RUNS, TEARDOWN),
             "Which one; Teardown leaves out its own."),
    AwsField("stepfunctions", "ListExecutions", "ExecutionListItem", "stopDate",
             "If the execution already ended, the date the execution stopped.", (GUARD,),
             "When the workflow last used FSx: the idle guard's clock starts there."),
)

# The modules that read these responses, and the operations each reads: every key they read that a response of those
# operations holds is in FIELDS (tests/test_aws_fields.py), or below with why it is no response's.
READERS: dict[str, dict[str, tuple[str, ...]]] = {
    RESULTS: {SM: (DTJ,)},
    COLLECT: {SM: (DTJ,)},
    RUNS: {SM: (DTJ,), "stepfunctions": ("StartExecution", "DescribeExecution", "ListExecutions")},
    JOBS: {SM: (DTJ,)},
    GUARD: {SM: (DTJ, "ListTrainingJobs"), "stepfunctions": ("ListExecutions",)},
    COMMON: {"fsx": ("DescribeFileSystems",)},
    FSX_DATA: {"fsx": ("DescribeFileSystems", "DescribeDataRepositoryAssociations", "DescribeDataRepositoryTasks")},
    CHECK_FSX: {"fsx": ("CreateDataRepositoryTask",)},   # its answer is a DataRepositoryTask
    PLAN: {"fsx": ("DescribeFileSystems",), "stepfunctions": ("ListExecutions",)},
    TEARDOWN: {"stepfunctions": ("ListExecutions",)},
    CLI_FSX: {"fsx": ("DescribeFileSystems",)},
    DEPLOY_CHECK: {"fsx": ("DescribeFileSystems",)},
    DEPLOY_GUARD: {"fsx": ("DescribeFileSystems",)},
    AWS_EFS: {"efs": ("DescribeFileSystems", "DescribeLifecycleConfiguration"),
              "datasync": ("DescribeTask", "StartTaskExecution", "DescribeTaskExecution")},
    CLI_EFS: {"datasync": ("DescribeTaskExecution",), "efs": ("DescribeFileSystems",)},
    MODEL_EFS: {"efs": ("DescribeFileSystems",)},
    DOCTOR: {"fsx": ("DescribeFileSystems",)},   # only whether FSx answers: nothing of the answer is read
}

# Keys a reader module reads that share a name with a response field but come from elsewhere.
_REQUEST = "`dslab plan` prints the CreateTrainingJob requests it would send (_reads_from): a request's"
_TEMPLATE = "AWS::FSx::FileSystem's properties in the deployed template (LustreShape.from_properties)"
_SSM = "an SSM parameter's (GetParameters)"
NOT_FROM_A_RESPONSE: dict[tuple[str, str], str] = {
    (RESULTS, "Name"): "the lab's own metric definitions (requests.METRIC_DEFINITIONS): a request's",
    **{(RUNS, key): _REQUEST for key in ("CheckpointConfig", "DataSource", "DirectoryPath", "FileSystemDataSource",
                                         "HyperParameters", "InputDataConfig", "LocalPath", "S3DataSource", "S3Uri")},
    (GUARD, "CreationTime"): "the FSx stack's (CloudFormation DescribeStacks)",
    (COMMON, "Name"): _SSM, (COMMON, "Value"): _SSM, (CLI_FSX, "Value"): _SSM,
    (PLAN, "Value"): "a Service Quotas quota's",
    (CHECK_FSX, "Message"): "an FSx error's Error.Message (the refusal's own words)",
    (DEPLOY_CHECK, "Type"): "a template resource's Type",
    **{(DEPLOY_GUARD, key): _TEMPLATE for key in ("DeploymentType", "FileSystemTypeVersion", "ImportPath")},
}

PAGE = Path(__file__).resolve().parents[3] / "docs" / "reference" / "aws-fields.md"


def markdown() -> str:
    """docs/reference/aws-fields.md: every field, by service and operation, with its words and its page."""
    out = ["# AWS response fields the product reads", "",
           "Every field the product reads from an AWS response of SageMaker, FSx, EFS, DataSync and Step Functions, "
           "in the API reference's own words, with where the product reads it and what it does with it. The product "
           "reads each as the reference defines it, never as the lab's stand-in happens to write it: "
           "BillableTimeInSeconds is one instance's wall clock, so the instances cost billable x InstanceCount x the "
           "hourly price; a spot job's saving is 1 - BillableTimeInSeconds / TrainingTimeInSeconds; its phases stay "
           "one instance's wall seconds from SecondaryStatusTransitions, never squeezed to the billable time.", "",
           "Generated from `dslab/core/facts/aws_fields.py` (`python -m dslab.core.facts.aws_fields --write`); "
           "`tests/test_aws_fields.py` checks each quote word for word against the API documentation in botocore's "
           "service models (the text the API reference is made from), that each module named reads the field and "
           "that every response field those modules read is here, and holds the stand-in and the product to the "
           "fields a figure rests on (rule). S3 listings, CloudFormation stacks, SSM parameters and Service Quotas "
           "are read as plain values and are not listed.", ""]
    for service, (title, _) in SERVICES.items():
        rows = [f for f in FIELDS if f.service == service]
        out += [f"## {title}", "", "| operation | field | the API reference | read in | what the product does | rule |",
                "|---|---|---|---|---|---|"]
        for f in rows:
            where = ", ".join(f"`{m}`" for m in f.read_in) or "not read"
            cells = [f.operation, f"[`{f.name}`]({f.page})", f"\"{f.quote}\"", where, f.use, f.rule or "-"]
            out.append("| " + " | ".join(c.replace("|", "\\|").replace("\n", " ") for c in cells) + " |")
        out.append("")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    import sys
    argv = sys.argv[1:] if argv is None else argv
    text = markdown()
    if "--write" in argv:
        PAGE.parent.mkdir(parents=True, exist_ok=True)
        PAGE.write_text(text)
        print(f"wrote {PAGE.name}: {len(FIELDS)} fields of {len(SERVICES)} services")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
