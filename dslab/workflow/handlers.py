"""The workflow's Lambda entry points: the templates name ``dslab.workflow.handlers.<function>``.

Thin adapters, one module per step: plan.py (Plan), check_fsx_data.py (CheckFsxData),
express_staging.py (StageExpress), collect.py (Collect), teardown.py (Teardown); what they share is in
common.py. All rules live in ``dslab.core``. Standard library and boto3 only (the Lambda runtime).
"""

from .check_fsx_data import fsx_data
from .collect import collect
from .express_staging import stage_express
from .plan import plan
from .teardown import teardown

__all__ = ["collect", "fsx_data", "plan", "stage_express", "teardown"]
