"""What the symptom text says about the setting: the facts an expert reads off a ticket before any log.

"Two-node all_reduce_perf over 200G HDR InfiniBand", "inside a Docker container", "8x A100-SXM4 (NVSwitch)",
"worked with NCCL 2.6, fails with 2.7", "on an Azure VM": each sets what the evidence means (what "slow" is,
which causes are likely, which are ruled out). Each fact is a ``context_*`` finding citing the symptom line; the
rules weigh them (weakly: a setting makes a cause likelier, it never proves one).
"""

from __future__ import annotations

import re

import pandas as pd

from diagnose.evidence.context import Context, finding
from diagnose.evidence.extractors import extractor
from diagnose.models.diagnosis import Finding
from diagnose.symptoms import SYMPTOM_SOURCE

_I = re.I
# the report names a RoCE fabric (also read by the catalog's transport findings, extractors/messages.py)
ROCE_SAID = re.compile(
    r"\bRoCE(?:v2)?\b|RDMA over Converged|\bRDMA over Ethernet|\bBroadcom\b|bnxt_re|ConnectX-\d Lx|\bL3 switch", _I)
# InfiniBand generations -> Gb/s of a 4X port (IBTA: FDR 56, EDR 100, HDR 200, NDR 400, XDR 800)
IB_GEN_GBPS = {"FDR": 56, "EDR": 100, "HDR": 200, "NDR": 400, "XDR": 800}

# the collectives and traffic kinds a report names
_COLL = (r"\b(?:ring |tree )?(?:all[-_ ]?reduce|all[-_ ]?gather|reduce[-_ ]?scatter|broadcast|bcast|all[-_ ]?to[-_ ]?all"
         r"|gather(?:-type)?|scatter|send[-/ ]?recv|p2p|point[- ]to[- ]point|checkpoint(?: save)?)(?:_perf)?\b")
# (finding kind, attributes, pattern): the first pattern of a kind that matches a line sets its attributes
FACTS: tuple[tuple[str, dict[str, object], re.Pattern[str]], ...] = (
    ("context_fabric", {"fabric": "roce"}, ROCE_SAID),
    ("context_fabric", {"fabric": "efa"}, re.compile(r"\bEFA\b|Elastic Fabric Adapter|libfabric|aws-ofi-nccl", _I)),
    ("context_fabric", {"fabric": "ib"}, re.compile(r"InfiniBand|\b(?:HDR|EDR|NDR|FDR|XDR)\b|\bIB\b|IPoIB", _I)),
    ("context_fabric", {"fabric": "ethernet"}, re.compile(r"\bEthernet\b|\bTCP\b|\b(?:10|25|40)\s?G(?:b|bE|bps)?\b", _I)),
    ("context_container", {}, re.compile(
        r"\bdocker\b|\bcontainers?\b|\bkubernetes\b|\bk8s\b|\bpods?\b|singularity|apptainer|enroot|pyxis|podman"
        r"|\bCI\b(?: job| runner)?", _I)),
    ("context_vm", {}, re.compile(
        r"\bVMs?\b|virtual machine|\bKVM\b|hypervisor|passthrough|vfio|\bAzure\b|\bAWS\b(?!-ofi)|\bGCP\b|\bEC2\b"
        r"|\bND\w*v\d\b|\bp4d\b|\bp5\b|cloud instance", _I)),
    ("context_nvswitch", {}, re.compile(
        r"NVSwitch|\bSXM\d?\b|\bDGX\b(?! ?(?:Spark|Station)\b)|\bHGX\b|\b8 ?x ?[AH]100\b|\b\d ?x ?[HB](?:100|200|800|300)\b|\bNVL(?:S|72|36)\b"
        r"|\bp5(?:en|e)?\b|\bp4de?\b", _I)),
    ("context_nvlink", {}, re.compile(r"NVLink|NV-?Link bridge|\bNVLS\b", _I)),
    # the report ties a fault to NVLink itself: its links or queries misbehave (on one GPU, a bridge): the link,
    # not the software above it
    ("context_nvlink_fault", {}, re.compile(
        r"(?<!\bno )(?<!\bwithout )\bNV-?Link(?: bridge)?\b(?:(?!\b(?:but|while|whereas|though)\b)[^.;]){0,50}?"
        r"\b(?:(?:takes?|took|taking) (?:(?:\d+|several|many|a few) ?)?(?:s\b|sec\w*|minutes?)|(?:is |are |was |were )?"
        r"(?:inactive|down|missing|not (?:active|detected|seated|working)|loose|unseated|partially (?:plugged|seated)"
        r"|hangs?|hung|slow|errors?|fails?|failed|replay\w*|recovery errors?|CRC)\b)", _I)),
    ("context_consumer_gpu", {}, re.compile(r"GeForce|\bRTX ?\d{4}|\bGTX ?\d{3,4}|\bTITAN\b|desktop|workstation", _I)),
    # GeForce RTX 40-series boards have peer-to-peer disabled by the product (the driver reports no P2P between
    # them): a P2P failure there is the software asking for P2P, not ACS or the IOMMU blocking it
    ("context_no_p2p_sku", {}, re.compile(r"\bRTX ?40[6-9]0(?: ?Ti| ?D| ?SUPER)?\b", _I)),
    ("context_amd_host", {}, re.compile(r"\bEPYC\b|Threadripper|\bAMD (?:CPU|host|server|Rome|Milan|Genoa)", _I)),
    ("context_single_node", {}, re.compile(
        r"single[- ]node|one node|within (?:a|one) node|intra-node|single (?:machine|server|host)|same node"
        r"|\bdesktop\b|\bworkstation\b|\bon (?:one|a single) (?:host|machine)\b"
        r"|\b(?:a|one|the same|single) (?:[^,.;]|(?<=\d)\.(?=\d)){0,30}?\b(?:box|PC)\b|\bsingle (?:\w+ )?(?:VM|instance|machine|server)\b", _I)),
    ("context_multi_node", {}, re.compile(
        r"\b(?:two|2|three|3|four|4|eight|8|\d{2,})[- ]nodes?\b|multi-?node|across (?:\w+ )?nodes|cross-?node|inter-?node"
        r"|between (?:two|2) (?:nodes|servers|hosts|machines)|\bnodes\b", _I)),
    ("context_version_change", {}, re.compile(
        r"after (?:an? )?(?:upgrad|updat|mov|switch)\w*|since (?:upgrad|updat)\w*|worked (?:fine )?(?:with|on|in|before)"
        r"|used to work|(?:upgrad|updat)\w* (?:to|from) (?:NCCL|CUDA|torch|PyTorch|driver|the driver|OFED|\d)"
        r"|downgrad\w*|regression|newer (?:NCCL|version|driver)", _I)),
    # the report ties the failure to a kernel release ("startup fails with kernel 7.0.0-1019", "after upgrading the
    # kernel"): the RDMA stack under NCCL and MPI (ib_core, mlx5_ib, peer memory, page pinning) is kernel code
    ("context_kernel_tied", {}, re.compile(
        r"\b(?:fail|hang|crash|break|broke|error|stuck|regress)\w*(?:[^.;]|\.\d){0,40}?\b(?:with|on|under|after|since)"
        r" (?:the )?(?:new |newer |latest |HWE |updated |upgraded )?(?:Linux )?kernel\b(?! parameter| module)"
        r"|\b(?:after|since) (?:we |I )?(?:upgrad|updat|mov|switch|boot)\w* (?:in)?to (?:the |a )?(?:new |newer |HWE )?"
        r"(?:Linux )?kernel\b|\b(?:after|since) (?:we |I )?(?:upgrad|updat)\w* (?:the |our )?(?:Linux |host )?kernel\b"
        r"|\bkernel (?:upgrade|update)\b", _I)),
    # GPU-to-GPU copies inside one machine: P2P tests, and DataParallel, which scatters inputs and replicates the
    # model with peer copies from the first GPU to the others at every step
    ("context_p2p_path", {}, re.compile(
        r"\bP2P\b|peer[- ]to[- ]peer|p2pBandwidth|simpleP2P|intra-node bandwidth|\bDataParallel\b(?! ?\()"
        r"|\bnn\.DataParallel\b", _I)),
    # one kind of collective works and another fails on the same hosts: every connection of the working one was set
    # up, so the addresses (GIDs, MTU, interfaces) route; what differs is which NIC pairs the failing one connects
    ("context_partial_collectives", {}, re.compile(
        _COLL + r"(?:(?!\bnot\b|n't\b)[^.;]){0,40}?\b(?:works?|worked|passes|passed|is fine|succeeds?|completes?)\b"
        r"[^.;]{0,25}?\b(?:but|while|whereas|yet)\b[^.;]{0,60}?" + _COLL + r"[^.;]{0,80}?"
        r"\b(?:fails?|failed|hangs?|hung|time[sd]? out|timed out|errors?)\b"
        r"|" + _COLL + r"[^.;]{0,60}?\b(?:fails?|failed|hangs?|hung|time[sd]? out|timed out)\b[^.;]{0,25}?"
        r"\b(?:but|while|whereas|yet)\b[^.;]{0,60}?" + _COLL + r"(?:(?!\bnot\b|n't\b)[^.;]){0,40}?"
        r"\b(?:works?|worked|passes|passed|is fine|succeeds?|completes?)\b", _I)),
    # the failure depends on the packet or message size: small ones pass, larger ones are lost (a hop or a port whose
    # MTU is below the packets' size; on InfiniBand the subnet manager's partition MTU)
    ("context_size_dependent", {}, re.compile(
        r"\b(?:larger|bigger|greater|longer|more) than (?:~|about |around )?\d+ ?(?:bytes|B|KB|KiB|k)\b"
        r"|\b(?:above|beyond|over) (?:~|about )?\d+ ?(?:bytes|B)\b"
        r"|\b(?:small|short|tiny) (?:messages?|packets?|pings?|sizes?|transfers?)\b[^.;]{0,30}?\b(?:work|pass|succeed|are fine|go through)"
        r"[^.;]{0,40}?\b(?:large|big|long|larger|bigger)\b"
        r"|\b(?:large|big|larger|bigger|jumbo) (?:messages?|packets?|pings?|transfers?|frames?)\b[^.;]{0,20}?"
        r"\b(?:fail|hang|time out|timed out|drop|are dropped|get lost|are lost|never arrive)", _I)),
    # the failure follows this machine: the same code works elsewhere (the platform's configuration, not the code)
    ("context_machine_specific", {}, re.compile(
        r"\b(?:others|other people|nobody|no one|no-one|you|they|maintainers?) (?:can(?:not|'t)|could(?:n't| not)|were"
        r" unable to|are unable to) (?:reproduce|replicate)|\b(?:works?|worked|runs?|ran) (?:fine |well )?on"
        r" (?:other|another|a different|different) (?:machines?|servers?|nodes?|hosts?|boxes?|systems?)"
        r"|\bonly (?:on|happens on|fails on) (?:this|our|my|one) (?:particular |specific )?(?:machine|server|box|system|node)", _I)),
    # a path the report says avoids the failure: that path is where the failure is
    ("context_workaround", {"path": "ib"}, re.compile(
        r"(?:works?|fine|passes|correct|no (?:hang|error))\w* (?:\w+ ){0,3}(?:if|when|with|after) (?:\w+ )?"
        r"(?:IB|InfiniBand|RDMA|GPUDirect|GDR)\w* (?:is |are )?(?:disabled|off|turned off)"
        r"|(?:disabling|without) (?:IB|InfiniBand|RDMA)\b[^.;]{0,30}(?:works|fixes|avoids|helps)", _I)),
    ("context_workaround", {"path": "p2p"}, re.compile(
        r"(?:works?|fine|passes|correct|no (?:hang|error))\w* (?:\w+ ){0,3}(?:if|when|with|after) (?:\w+ )?"
        r"P2P (?:is )?(?:disabled|off|turned off)|(?:disabling|without) P2P\b[^.;]{0,30}(?:works|fixes|avoids|helps)",
        _I)),
    ("context_workaround", {"path": "gdr"}, re.compile(
        r"(?:succeeds?|works?|fine|passes)\w* (?:\w+ ){0,4}(?:nv_peer_mem\w*|nvidia[-_]peermem|GDR|GPUDirect(?: RDMA)?)\w* "
        r"(?:module )?(?:is |are )?(?:disabled|unloaded|off|removed)|crash\w* (?:\w+ ){0,3}when (?:the )?"
        r"(?:nv_peer_mem\w*|nvidia[-_]peermem|GDR)\w* (?:module )?is (?:loaded|enabled)", _I)),
    # the report says GPUDirect RDMA is not in use (the question is then why: peermem, ACS, the NIC's distance)
    ("context_gdr_missing", {}, re.compile(
        r"(?:not|n't|never) (?:use|using|used|enabl\w*|tak\w*)(?: the)?(?: direct)? (?:GPU[- ]to[- ]NIC (?:RDMA|path)|GPUDirect(?: RDMA)?"
        r"|GDR(?:DMA)?)\b|\b(?:GPUDirect(?: RDMA)?|GDR(?:DMA)?) (?:is |was )?(?:not (?:used|enabled|working|active)|missing)", _I)),
    # the report says the GPUDirect RDMA pieces are in place ("GPUDirect RDMA is loaded", "nv_peer_mem is
    # loaded"): the commonest reason for host-staged traffic is then excluded (being loaded is not being used:
    # the NIC's distance from the GPU or ACS can still keep NCCL off GDR)
    ("context_gdr_present", {}, re.compile(
        r"\b(?:GPUDirect(?: RDMA)?|GDR(?:DMA)?|nv_peer_mem\w*|nvidia[-_]peermem)(?: (?:kernel )?module)? (?:is|was|are|were)"
        r" (?:already |properly |correctly )?(?:loaded|enabled|active|in use|installed and loaded)\b", _I)),
    # the report says PCIe ACS is off ("ACS is disabled", "disabled ACS in the BIOS")
    ("context_acs_off", {}, re.compile(
        r"\bACS(?: \w+){0,2} (?:is|was|are|were|has been|have been) (?:already )?(?:disabled|off|turned off)\b"
        r"|\b(?:disabled|turned off) (?:the )?(?:PCIe )?ACS\b", _I)),
    # some GPU indices (local ranks) are slower than the rest, the same ones on every node: what is per GPU index
    # is its PCIe path and the NIC NCCL pairs it with (a wrong pairing, a NIC shared by two GPUs); a bad cable or
    # a straggler is one node's, not the same GPUs everywhere
    ("context_gpu_index_slow", {}, re.compile(
        r"\b(?:GPUs?|local[ _]ranks?|devices?|cards?) ?#?\d+(?:\s*(?:,|and|&|/|or)\s*(?:(?:GPU|local[ _]rank|device|card)"
        r" ?)?#?\d+)+\b(?:[^.;]|\.\d){0,80}?\b(?:slower|slow|takes?|took|lower|less|only)\b(?:[^.;]|\.\d){0,60}?"
        r"\b(?:while|than|whereas|but|vs\.?)\b[^.;]{0,20}?\b(?:the )?(?:others?|rest|remaining|other (?:GPUs|ranks))\b", _I)),
    # the same test is fast between some pairs of nodes and slow between others: the path, not a node
    ("context_pair_dependent", {}, re.compile(
        r"nodes? \d+ ?(?:\+|and|&|/) ?\d+[^.;]{0,60}?\d+(?:\.\d+)? ?GB/s[^.;]{0,40}?(?:while|but|whereas|vs\.?)[^.;]{0,30}?"
        r"nodes? \d+ ?(?:\+|and|&|/) ?\d+", _I)),
    # memory that could not be allocated or registered at start-up (UCX, verbs, MPI_Init, NCCL's buffers): pinned
    # memory an RDMA stack registers is capped by the locked-memory limit before anything else
    ("context_alloc_failure", {}, re.compile(
        r"memory allocation (?:error|fail)\w*|(?:cannot|can't|could ?n[o']t|unable to|failed to) (?:allocate|register|pin)"
        r"|out of (?:pinned|locked|registered) memory|\bENOMEM\b|memory registration (?:error|fail)\w*", _I)),
    # the failure comes and goes: configuration (a GID index, an MTU, an interface) fails every run the same way;
    # what is intermittent is physical or load-dependent (lossy RoCE, a marginal cable, congestion, a flapping port)
    ("context_intermittent", {}, re.compile(
        r"\bintermittent\w*|\bsporadic\w*|\brandom(?:ly)? (?:fail|hang|crash|error)\w*"
        r"|\b(?:sometimes|occasionally) (?:\w+ )?(?:fails?|hangs?|crash\w*|errors?|works?|pass\w*|succeed\w*|time[sd]? out)"
        r"|\bflaky\b|from time to time|once in a while|(?:re-?runs?|retries|retrying) (?:\w+ )?(?:often |usually )?(?:pass|succeed|work)"
        r"|could(?: not|n't) reproduce|not (?:always|every time)|every (?:few|couple of) (?:hours|days|runs)", _I)),
    # results that are wrong, not slow or failed: NaN losses, zeros or garbage after a GPU-to-GPU copy
    ("context_wrong_results", {}, re.compile(
        r"\bNaNs?\b(?! (?:check|detect))|\b(?:garbage|wrong|incorrect|corrupt\w*) (?:values?|results?|data|outputs?|gradients?|tensors?)"
        r"|(?:yields?|returns?|gives?|contains?|produces?) (?:all )?zeros|silent(?:ly)? (?:data )?corrupt\w*|gradients differ", _I)),
    # the reporter's own RDMA test between the same hosts passes: the ports, cables and the path carry RDMA traffic
    # (one or two queue pairs at a time: what fails then is what a collective adds, many QPs, larger messages, load)
    ("context_perftest_ok", {}, re.compile(
        r"\b(?:ib_(?:write|read|send)_(?:bw|lat)|perftest|rping|ibv_rc_pingpong)\b(?:(?!\bnot\b|n't\b|\bfail)[^.;]){0,60}?"
        r"\b(?:works?|worked|working|runs? fine|ran fine|passe[sd]|succeed\w*|(?:is|was|are) fine|(?:is|was|are) ok"
        r"|(?:gets?|got|shows?|reach\w*) (?:the )?(?:full|line|expected))", _I)),
    # the report dates the failure from a change to the switches or the fabric: their MTU, PFC/QoS and partition
    # settings are what such a change touches
    ("context_fabric_change", {}, re.compile(
        r"\b(?:after|since|when) (?:we |they |I |the |an? |our )?(?:\w+ ){0,3}?(?:switch|fabric|network)(?:es)?"
        r"(?: ports?| config\w*| firmware| settings?)? (?:were |was |got |had been |have been |has been )?"
        r"(?:re-?configur|chang|updat|upgrad|replac|modif|re-?cabl|limit|reset)\w*"
        r"|\b(?:after|since) (?:we |they |I )?(?:re-?configur|chang|updat|upgrad|replac|modif)\w* (?:the |our |a )?"
        r"(?:\w+ )?switch(?:es)?\b", _I)),
    # RoCE run lossy-by-design or on link-level pause: 802.3x global pause stops every priority at once, where a
    # lossless RoCE fabric pauses only the RDMA priority (PFC, 802.1Qbb)
    ("context_global_pause", {}, re.compile(
        r"\bglobal[- ]pause\b|802\.3x\b|link[- ]level (?:flow[- ]control|pause)", _I)),
    ("context_slow", {}, re.compile(
        r"\bslow|far below|lower than expected|half (?:the )?(?:bandwidth|speed)|low (?:bus ?bw|bandwidth)"
        r"|only \d+(?:\.\d+)? ?GB/s|\bGB/s\b.*\b(?:expected|should)", _I)),
)
# the report quotes an RDMA transport failure: a queue pair's completion error or retry exhaustion
_RDMA_FAILURE_SAID = re.compile(
    r"RETRY_EXC|retry (?:count(?:er)? )?exceeded|completion (?:with )?error|work completion|\bQPs?\b|queue pair", _I)
_RATE = re.compile(r"\b(?P<g>100|200|400|800|56|40|25|50)\s?G(?:b(?:/s|ps)?|bE)?\b|\b(?P<gen>NDR|HDR|EDR|FDR|XDR)\b", _I)


@extractor(reads=("EnvSetting", "FreeText", "MessageHit", "NcclCommInfo", "NcclTestsRank"),
           emits=("context_acs_off", "context_alloc_failure", "context_amd_host", "context_consumer_gpu",
                  "context_container", "context_container_multi_node", "context_fabric", "context_fabric_change",
                  "context_gdr_missing", "context_gdr_present", "context_global_pause", "context_gpu_count_dependent",
                  "context_gpu_index_slow", "context_intermittent", "context_kernel_tied", "context_link_rate",
                  "context_machine_specific", "context_multi_node", "context_no_p2p_sku", "context_nvlink",
                  "context_nvlink_fault", "context_nvswitch", "context_p2p_path", "context_pair_dependent",
                  "context_partial_collectives", "context_perftest_ok", "context_single_node",
                  "context_size_dependent", "context_slow", "context_version_change", "context_vm",
                  "context_vm_internode_slow", "context_workaround", "context_wrong_results",
                  "nccl_system_error_single_node"))
def symptom_context(ctx: Context) -> list[Finding]:
    sym = symptom_rows(ctx)
    out: list[Finding] = []
    seen: set[str] = set()
    for kind, attrs, rx in FACTS:
        key = kind + str(sorted(attrs.items())) if kind == "context_workaround" else kind
        if key in seen:
            continue
        rows = sym[sym["text"].astype(str).str.contains(rx)]
        if rows.empty:
            continue
        seen.add(key)
        m = rx.search(str(rows["text"].iloc[0]))
        said = m.group(0) if m else ""
        out.append(finding(kind, f"The report says '{said}'.", rows.head(1),
                           attrs={**attrs, "said": said}))  # type: ignore[dict-item]
    kinds = {f.kind for f in out}
    if "context_gdr_missing" in kinds and any(f.kind == "context_workaround" and f.attrs.get("path") == "gdr" for f in out):
        # "works when GDR is disabled": the failing run used GPUDirect RDMA
        out = [f for f in out if f.kind != "context_gdr_missing"]
        kinds.discard("context_gdr_missing")
    if "context_single_node" not in kinds and "context_multi_node" not in kinds:
        one = _one_host_job(ctx)  # the evidence says so: every rank of the test on one host, or NCCL's nNodes 1
        if one is not None:
            out.append(finding("context_single_node", "Every rank of the job runs on one host.", one,
                               attrs={"said": "", "from_evidence": True}))
            kinds.add("context_single_node")
    if "context_single_node" in kinds and not any(f.attrs.get("from_evidence") for f in out
                                                  if f.kind == "context_single_node") \
            and sym["text"].astype(str).str.contains(_RDMA_FAILURE_SAID).any():
        # "a 16-GPU box ... hangs after a TRANSPORT_RETRY_EXC_ERR on a QP": its traffic crossed the NICs and the
        # fabric, one box or not
        out = [f for f in out if f.kind != "context_single_node"]
        kinds.discard("context_single_node")
    if "context_single_node" in kinds and "context_multi_node" in kinds:
        # "works on one node, fails across two": the failing job spans nodes
        out = [f for f in out if f.kind != "context_single_node"]
        kinds.discard("context_single_node")
    if "context_single_node" in kinds:
        out += _single_node_system_error(ctx)
    if {"context_vm", "context_multi_node"} <= kinds and ("context_slow" in kinds or _slow_said(sym)):
        # between VMs, GPUDirect RDMA is a peer-to-peer write from a passed-through NIC into a passed-through GPU:
        # it crosses the hypervisor's IOMMU and the host's PCIe switches, where ACS redirects it to the root
        # complex unless the host sets ACS/ATS for passthrough (NCCL troubleshooting guide, "PCI Access Control
        # Services" and "Virtual machines"); inside the VM a flat PCIe tree hides the real distances from NCCL
        vm = next(f for f in out if f.kind == "context_vm")
        out.append(finding("context_vm_internode_slow",
                           "Slow collectives between VMs: the GPU<->NIC traffic crosses the hypervisor's IOMMU and the"
                           " host's PCIe switches.", None, attrs={"said": vm.attrs.get("said", "")},
                           evidence=vm.evidence))
    if {"context_container", "context_multi_node"} <= kinds:
        # containers on several hosts: Docker's default bridge network is single-host (Docker docs, "Network
        # drivers"), so without host networking or an overlay each container has only a private address that the
        # other hosts cannot reach, and NCCL's bootstrap and socket connections use it
        ctr = next(f for f in out if f.kind == "context_container")
        out.append(finding("context_container_multi_node",
                           "Containers on several hosts: unless they use the host's network, each has only a private"
                           " bridge address for NCCL's sockets.", None, attrs={"said": ctr.attrs.get("said", "")},
                           evidence=ctr.evidence))
    out += _gpu_count_dependent(sym, "context_single_node" in kinds)
    rates = []
    for t in sym["text"].astype(str):
        for m in _RATE.finditer(t):
            rates.append(int(m["g"]) if m["g"] else IB_GEN_GBPS[m["gen"].upper()])
    if rates:
        out.append(finding("context_link_rate", f"The report names a {max(rates)} Gb/s fabric.",
                           sym.head(1), attrs={"gbps": max(rates)}))
    return out


# "-g 4 hangs, -g 2 is fine", "hangs with 4 GPUs, the same test on 2 GPUs completes": one job size fails, another works
_GPU_COUNT = re.compile(r"\b(\d{1,3}) ?(?:x ?)?(?:GPUs?|ranks?|processes|procs)\b|(?:^|\s)-g ?(\d{1,3})\b|\bg ?= ?(\d{1,3})\b"
                        r"|\b(?:nproc[-_]per[-_]node|np)[ =](\d{1,3})\b", _I)
_COUNT_FAILS = re.compile(r"\b(?:hang\w*|hung|stuck|fail\w*|freez\w*|froze|crash\w*|deadlock\w*|time[sd]? out|timed out"
                          r"|errors? out)\b", _I)
_COUNT_WORKS = re.compile(r"(?<!not )(?<!n't )\b(?:works?|worked|normal(?:ly)?|fine|completes?|completed|succeeds?|succeeded"
                          r"|passe[sd]|runs? through|no problem)\b", _I)


def _gpu_count_dependent(sym: pd.DataFrame, single_node: bool) -> list[Finding]:
    """The report says the job fails at one size and works at another on the same host(s) ("all_reduce_perf with
    4 GPUs hangs, with 2 GPUs it completes"): the GPUs a larger job adds bring in paths and algorithms a smaller one
    does not use (peer pairs across PCIe switches or sockets, NVLS, trees), so the intra-node transports and the
    peer paths are the suspects, not the network or the code."""
    for idx, t in sym["text"].astype(str).items():
        for sent in re.split(r"(?<=[.;!?])\s+", t):
            counts = {next(g for g in m.groups() if g) for m in _GPU_COUNT.finditer(sent)}
            if len(counts) >= 2 and _COUNT_FAILS.search(sent) and _COUNT_WORKS.search(sent):
                return [finding("context_gpu_count_dependent",
                                f"The report says the job fails at one size and works at another: '{sent[:160]}'.",
                                sym.loc[[idx]], attrs={"said": sent[:160], "counts": ",".join(sorted(counts, key=int)),
                                       "single_node": single_node})]
    return []


def _slow_said(sym: pd.DataFrame) -> bool:
    from diagnose.symptoms import classify

    return any("collective_slow" in classify(str(t)) for t in sym["text"].head(20))


def _single_node_system_error(ctx: Context) -> list[Finding]:
    """NCCL's ``unhandled system error`` in a job on one host. There NCCL makes no verbs call (no RDMA, so no locked
    memory registration) and its sockets only reach localhost: the system calls left to fail are its shared-memory
    segments (``/dev/shm``: create, ``posix_fallocate``, ``mmap``), which a container's 64 MB default is too small
    for (NCCL troubleshooting guide, "Docker": use ``--shm-size=1g --ulimit memlock=-1`` or ``--ipc=host``)."""
    hits = ctx.frame("MessageHit")
    if hits.empty:
        return []
    err = hits[hits["kind"] == "nccl_unhandled_system_error"]
    if err.empty:
        return []
    env = ctx.frame("EnvSetting")
    if not env.empty:
        vals = dict(zip(env["name"].astype(str), env["value"].astype(str).str.strip("\"' "), strict=False))
        if vals.get("NCCL_SHM_DISABLE") == "1" or vals.get("NCCL_TOPO_FILE") or vals.get("NCCL_GRAPH_FILE"):
            # traffic forced onto the NIC on one host (verbs calls again), or a topology/graph file NCCL must open
            # and read (xml.cc returns ncclSystemError when it cannot): other system calls are in play
            return []
    if (hits["kind"] == "nccl_topo_file_seen").any():
        return []  # NCCL read a topology or graph file: importing it is the other system call that fails at init
    texts = hits["text"].astype(str)
    if texts.str.contains(r"\bibv_|NET/IB|via NET/", regex=True).any():
        return []  # the host's NIC is in use: verbs calls (registration, QPs) can fail too
    return [finding("nccl_system_error_single_node",
                    "NCCL reports an unhandled system error in a job on one host, where its only system calls that "
                    "can fail are its shared-memory segments.", err.head(2))]


def _one_host_job(ctx: Context) -> pd.DataFrame | None:
    """A row showing that the job ran on one host, or None: NCCL's ``comm ... nNodes 1`` on every communicator, or
    an nccl-tests run whose ranks (two or more) all name one host."""
    comm = ctx.frame("NcclCommInfo")
    if not comm.empty and "nnodes" in comm and int(comm["nnodes"].max()) == 1:
        return comm.head(1)
    ranks = ctx.frame("NcclTestsRank")
    if not ranks.empty and "host" in ranks and len(ranks) >= 2 and ranks["host"].notna().all() \
            and ranks["host"].nunique() == 1 and ctx.frame("NcclCommInfo").empty:
        return ranks.head(1)
    return None


def fact_patterns(kind: str, **attrs: object) -> list[re.Pattern[str]]:
    """The patterns that make the report state ``kind`` (``context_fabric``, ``context_container``...) with these
    attributes (a tuple of values: any of them)."""
    def fits(a: dict[str, object]) -> bool:
        return all(a.get(k) in (v if isinstance(v, tuple) else (v,)) for k, v in attrs.items())

    return [rx for k, a, rx in FACTS if k == kind and fits(a)]


def symptom_rows(ctx: Context) -> pd.DataFrame:
    """The reporter's lines: the symptom text first, then the sentences written into the bundle's files (a
    ``report.txt``, the words around a paste), each file in line order (an empty frame with FreeText's columns
    when there are none)."""
    ft = ctx.frame("FreeText")
    if ft.empty:
        return pd.DataFrame(columns=["source", "line", "text", "host"])
    key = ft["source"].ne(SYMPTOM_SOURCE).astype(int).astype(str) + "\0" + ft["source"].astype(str)
    return ft.assign(_k=key).sort_values(["_k", "line"], kind="stable").drop(columns="_k")
