"""The CloudProvider on AWS (boto3): EC2 CreateFleet launches, SSM AMI parameters, Pricing API prices.

Modules: :mod:`.catalog` (pure: EC2 answers -> InstanceTypes, PriceBook, pricing files; usable
without a client, e.g. by ``groupless plan``), :mod:`.amis`, :mod:`.userdata`,
:mod:`.launchtemplates`, :mod:`.fleet` (pure request builders), :mod:`.pricing`,
:mod:`.errors`, :mod:`.settings` and :mod:`.provider` (``AWSCloudProvider``). This package
imports nothing itself, so importing the pure catalog does not load boto3.
"""
