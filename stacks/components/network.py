"""The lab's network: one AZ (placed by zone ID), isolated subnets only, S3 (and S3 Express) gateway endpoints, flow logs, security groups."""

from __future__ import annotations

import ipaddress

from aws_cdk import Aws, RemovalPolicy, aws_ec2 as ec2, aws_logs as logs
from constructs import Construct

from dslab.aws.zones import subnet_block

# Lustre: the clients reach the servers on 988 and 1018-1023 (AWS FSx for Lustre user guide,
# "File system access control with Amazon VPC").
LUSTRE_PORTS = (ec2.Port.tcp(988), ec2.Port.tcp_range(1018, 1023))
NFS_PORT = ec2.Port.tcp(2049)



class LabNetwork(Construct):
    """A VPC in a single AZ with private isolated subnets: no internet gateway, no NAT.

    Training jobs reach S3 through the gateway endpoint; SageMaker pulls the training image itself.
    A Script job's own requests (the training script's boto3 or S3 Connector calls, signed with the
    job's role) leave the container in these subnets and take the same routes: the S3 gateway endpoint
    for the lab's bucket ("With a gateway endpoint, you can access Amazon S3 from your VPC, without
    requiring an internet gateway or NAT device for your VPC, and with no additional cost",
    https://docs.aws.amazon.com/vpc/latest/privatelink/vpc-endpoints-s3.html), the S3 Express one
    below for the directory bucket, CreateSession included ("Examples of Zonal endpoint API operations
    are CreateSession and PutObject", s3-express-networking.html, below). No interface endpoint is
    added for them: the container's credentials are the role's, which SageMaker provides (README, "only a
    real run can confirm"). The request builder never sets EnableNetworkIsolation, which would cut the
    container off from the network ("the training container does not have network access").
    Security groups are created here, in the stack that outlives FSx, so tearing FSx down never
    touches a rule the rest of the lab depends on.
    """

    def __init__(self, scope: Construct, construct_id: str, *, az_id: str, cidr: str, express: bool = False) -> None:
        super().__init__(scope, construct_id)
        # ec2.Vpc places subnets by zone *name*, and names map to different physical zones in each
        # account; the zone *ID* is the same everywhere. So the VPC is laid out for one zone whose name
        # is unknown at synthesis (the token AWS::NoValue: "no value" to CloudFormation) and the subnet's
        # AvailabilityZone property is replaced by AvailabilityZoneId (AWS::EC2::Subnet accepts either:
        # https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-resource-ec2-subnet.html).
        # A token, not a placeholder name: bound to an account, `cdk deploy` looks the region's zone
        # names up and ec2.Vpc refuses a literal name that is not among them (it skips the check for an
        # unresolved token). Nothing renders the name (FSx, EFS and the jobs take the subnet ID; a test
        # checks no AWS::NoValue is left); the real name is the subnet's GetAtt AvailabilityZone, the
        # Core output AvailabilityZone.
        self.az_id = az_id
        # The subnet is one of the VPC's 16 blocks, chosen by the zone's number (use1-az4: the 4th): moving
        # the lab to another zone creates the new subnet beside the old one before the old goes (EC2
        # refuses overlapping CIDRs: "The CIDR ... conflicts with another subnet").
        network = ipaddress.ip_network(cidr)
        subnet_prefix = network.prefixlen + 4
        self.subnet_cidr = str(list(network.subnets(new_prefix=subnet_prefix))[subnet_block(az_id)])
        self.vpc = ec2.Vpc(
            self, "Vpc",
            ip_addresses=ec2.IpAddresses.cidr(cidr),
            availability_zones=[Aws.NO_VALUE],
            nat_gateways=0,
            subnet_configuration=[
                ec2.SubnetConfiguration(name="training", subnet_type=ec2.SubnetType.PRIVATE_ISOLATED, cidr_mask=subnet_prefix),
            ],
            gateway_endpoints={"S3": ec2.GatewayVpcEndpointOptions(service=ec2.GatewayVpcEndpointAwsService.S3)},
        )
        if express:
            # The S3 gateway endpoint does not cover directory buckets: S3 Express One Zone has its own
            # gateway endpoint service (com.amazonaws.<region>.s3express) for both the Regional and the
            # Zonal API operations ("You can access both Zonal and Regional API operations through gateway
            # virtual private cloud (VPC) endpoints ... There is no additional charge for using gateway
            # endpoints", https://docs.aws.amazon.com/AmazonS3/latest/userguide/s3-express-networking.html).
            # Without it, jobs in the isolated subnets have no route to the directory bucket.
            self.vpc.add_gateway_endpoint("S3Express", service=ec2.GatewayVpcEndpointAwsService.S3_EXPRESS,
                                          subnets=[ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_ISOLATED)])
        flow_log_group = logs.LogGroup(self, "FlowLogs", retention=logs.RetentionDays.ONE_MONTH,
                                       removal_policy=RemovalPolicy.DESTROY)
        self.vpc.add_flow_log("FlowLog", destination=ec2.FlowLogDestination.to_cloud_watch_logs(flow_log_group))
        self.subnet = self.vpc.isolated_subnets[0]
        for subnet in self.vpc.isolated_subnets:
            cfn_subnet = subnet.node.default_child
            cfn_subnet.add_property_deletion_override("AvailabilityZone")
            cfn_subnet.add_property_override("AvailabilityZoneId", az_id)
            cfn_subnet.add_property_override("CidrBlock", self.subnet_cidr)
        self.subnet_zone_name = self.subnet.node.default_child.attr_availability_zone

        self.training_sg = ec2.SecurityGroup(
            self, "TrainingSg", vpc=self.vpc, allow_all_outbound=True,
            description="DataSourceLab training jobs")
        # Distributed training: SageMaker requires instances of one job to reach each other.
        self.training_sg.add_ingress_rule(self.training_sg, ec2.Port.all_traffic(),
                                          "Instances of one multi-instance training job")

        self.fsx_sg = ec2.SecurityGroup(
            self, "FsxSg", vpc=self.vpc, allow_all_outbound=False,
            description="DataSourceLab FSx for Lustre: Lustre ports from training jobs only")
        for port in LUSTRE_PORTS:
            self.fsx_sg.add_ingress_rule(self.training_sg, port, "Lustre from training jobs")
            # Lustre servers of one file system talk to each other on the same ports.
            self.fsx_sg.add_ingress_rule(self.fsx_sg, port, "Lustre between file-system servers")
            self.fsx_sg.add_egress_rule(self.fsx_sg, port, "Lustre between file-system servers")
            self.fsx_sg.add_egress_rule(self.training_sg, port, "Lustre replies to training jobs")
            # The clients' group too: the FSx for Lustre guide ("File system access control with
            # Amazon VPC", table "Lustre client VPC security group rules") has clients accept 988 and
            # 1018-1023 from the file system's group, because LNet connects in both directions
            # (https://docs.aws.amazon.com/fsx/latest/LustreGuide/limit-access-security-groups.html).
            self.training_sg.add_ingress_rule(self.fsx_sg, port, "Lustre from the FSx file system (LNet connects both ways)")

        self.efs_sg = ec2.SecurityGroup(
            self, "EfsSg", vpc=self.vpc, allow_all_outbound=False,
            description="DataSourceLab EFS: NFS from training jobs only")
        self.efs_sg.add_ingress_rule(self.training_sg, NFS_PORT, "NFS from training jobs")
